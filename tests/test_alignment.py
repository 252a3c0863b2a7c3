import pytest
import torch

from nmt.alignment.aer import AERCounts, aer_grid
from nmt.alignment.choice import READOUTS, AttentionChoice, attention_map, choice_at
from nmt.alignment.links import parse_links
from nmt.alignment.symmetrisation import COMBINATIONS, grow_diag_final_and
from nmt.alignment.words import attention_links, piece_words, word_attention, word_links


def test_piece_words():
    assert piece_words(["▁La", "▁tas", "se", "▁rouge", "."]) == [0, 1, 1, 2, 2]
    assert piece_words(["J", "'", "ai", "▁faim"]) == [0, 0, 0, 1]


def test_word_attention_sums_source_and_averages_target_pieces():
    w = torch.tensor([[0.5, 0.25, 0.25], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    words = word_attention(w, [0, 1, 1], [0, 0, 1])
    assert torch.allclose(words, torch.tensor([[0.25, 0.75], [0.0, 1.0]]))


def test_aer_perfect_partial_and_wrong():
    sure, possible = parse_links("0-0 1-2 2-1"), parse_links("3-1")
    perfect = AERCounts()
    perfect.add({(0, 0), (1, 2), (2, 1)}, sure, possible)
    assert AERCounts.aer(perfect.as_tensor()) == 0.0
    possible_only = AERCounts()
    possible_only.add({(0, 0), (1, 2), (3, 1)}, sure, possible)
    assert 0 < AERCounts.aer(possible_only.as_tensor()) < 0.5
    wrong = AERCounts()
    wrong.add({(2, 0), (0, 2), (1, 1)}, sure, possible)
    assert AERCounts.aer(wrong.as_tensor()) == 1.0


def test_attention_links_take_the_most_attended_word():
    # target "the red cup" over source "la tasse rouge": crossing links
    w = torch.tensor([[0.9, 0.05, 0.05], [0.1, 0.1, 0.8], [0.1, 0.8, 0.1]])
    assert attention_links(w, ["▁la", "▁tasse", "▁rouge"], ["▁the", "▁red", "▁cup"]) == {(0, 0), (2, 1), (1, 2)}


def test_aer_exact_on_sure_and_possible_links():
    # S = {0-0, 1-2}, P = S + {2-1, 3-1}; A = {0-0, 2-1, 3-3}: |A∩S| = 1, |A∩P| = 2, |A| = 3, |S| = 2
    counts = AERCounts()
    counts.add({(0, 0), (2, 1), (3, 3)}, parse_links("0-0 1-2"), parse_links("2-1 3-1"))
    assert counts.as_tensor().tolist() == [1, 2, 3, 2]
    assert AERCounts.aer(counts.as_tensor()) == 1 - 3 / 5  # 1 - F1 (precision 2/3, recall 1/2) would be 3/7
    counts.add({(0, 1)}, parse_links("0-1"), set())  # a second sentence adds to the sums
    assert AERCounts.aer(counts.as_tensor()) == 1 - 5 / 7


def test_attention_links_need_the_gold_word_counts():
    w = torch.eye(3)
    src, tgt = ["▁la", "▁tas", "se"], ["▁the", "▁cu", "p"]
    assert attention_links(w, src, tgt, 2, 2) == {(0, 0), (1, 1)}
    assert attention_links(w, src, tgt, 3, 2) is None and attention_links(w, src, tgt, 2, 3) is None


def test_the_shift_att_readout_reads_the_row_whose_input_is_the_word():
    # rows: step 0 (input BOS, outputs y0), step 1 (input y0, outputs y1), step 2 (input y1, outputs EOS)
    w = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])[None, None]  # (layers 1, heads 1, T + 1 = 3, S = 2)
    assert torch.equal(attention_map(w), w[0, 0])
    shifted = attention_map(w, AttentionChoice(readout="input"))
    assert torch.equal(shifted, torch.tensor([[0.2, 0.8], [0.6, 0.4], [0.0, 0.0]]))  # y_j <- the step reading y_j


def test_a_choice_picks_its_layer_and_head_or_the_mean():
    w = torch.rand(3, 2, 4, 5)  # (layers, heads, T, S)
    assert torch.equal(attention_map(w, AttentionChoice(1, 0)), w[1, 0])
    assert torch.allclose(attention_map(w, AttentionChoice(0)), w[0].mean(0))
    assert torch.allclose(attention_map(w), w[-1].mean(0))
    assert choice_at((1, 2, 2, 0), heads=2) == AttentionChoice(2, None, "input")  # the last column is the mean
    assert choice_at((0, 1, 0, 4), heads=2) == AttentionChoice(1, 0, "output", "grow-diag-final-and")
    with pytest.raises(ValueError, match="layer=3: the model has 3 attention layer"):
        AttentionChoice(3).check(3, 2)
    with pytest.raises(ValueError, match="head=2: the model has 2 head"):
        AttentionChoice(0, 2).check(3, 2)


def test_aer_of_every_layer_and_head_on_hand_made_links():
    src, tgt = ["▁a", "▁b"], ["▁x", "▁y"]
    sure = {(0, 0), (1, 1)}
    diagonal, crossed = torch.tensor([[1.0, 0], [0, 1], [0.5, 0.5]]), torch.tensor([[0, 1.0], [1, 0], [0.5, 0.5]])
    w = torch.zeros(2, 2, 3, 2)  # (layers, heads, T + 1, S)
    w[0, 0], w[0, 1] = diagonal, crossed  # layer 0: head 0 right, head 1 wrong with the output readout
    w[1, 0] = torch.tensor([[0.5, 0.5], [1, 0], [0, 1]])  # layer 1 head 0: right one row later (Shift-Att)
    w[1, 1] = torch.tensor([[0.5, 0.5], [0, 1], [1, 0]])
    grid = aer_grid(w, src, tgt, sure, set(), (2, 2))
    aer = AERCounts.aers(grid)[..., 0]  # (readouts, layers, heads + 1), forward links
    out, inp = READOUTS.index("output"), READOUTS.index("input")
    assert aer[out, 0, 0] == 0 and aer[out, 0, 1] == 1 and aer[inp, 1, 0] == 0 and aer[inp, 1, 1] == 1
    assert aer[out, 1, 0] == 0.5  # [.5 .5] ties to word 0 for y0 (right), [1 0] links y1 to word 0 (wrong)
    assert grid.shape == (2, 2, 3, len(COMBINATIONS), 4) and (grid[..., 0, 2] == 2).all() and (grid[..., 3] == 2).all()
    assert aer_grid(w, src, tgt, sure, set(), (3, 2)) is None  # pieces that do not form the gold words


def test_the_grid_counts_what_the_links_of_each_choice_count():
    src, tgt = ["▁le", "▁ch", "at", "▁dort"], ["▁the", "▁sle", "eps"]  # 3 source words, 2 target words
    sure, possible = {(0, 0), (2, 1)}, {(1, 0), (1, 1)}
    for seed in range(20):
        w = (torch.rand(3, 4, 3, 4, generator=torch.Generator().manual_seed(seed)) * 4).softmax(-1)
        grid = aer_grid(w, src, tgt, sure, possible, (3, 2))
        for r in range(2):
            for layer in range(3):
                for h in range(5):
                    for k in range(len(COMBINATIONS)):
                        choice = choice_at((r, layer, h, k), 4)
                        links = attention_links(attention_map(w, choice), src, tgt, 3, 2, links=choice.links)
                        counts = AERCounts()
                        counts.add(links, sure, possible)
                        assert torch.equal(grid[r, layer, h, k].double(), counts.as_tensor()), (seed, r, layer, h, k)


def test_links_are_read_from_the_word_map_in_either_direction_or_both_symmetrised():
    words = torch.tensor(  # (target words 3, source words 4)
        [[0.6, 0.0, 0.4, 0.0], [0.1, 0.1, 0.3, 0.5], [0.1, 0.5, 0.1, 0.3]]
    )
    forward = {(0, 0), (3, 1), (1, 2)}  # each target word's most attended source word
    reverse = {(0, 0), (1, 2), (2, 0), (3, 1)}  # each source word's most attending target word
    assert word_links(words) == word_links(words, "forward") == forward
    assert word_links(words, "reverse") == reverse
    assert word_links(words, "intersection") == forward & reverse and word_links(words, "union") == forward | reverse
    assert word_links(words, "grow-diag-final-and") == grow_diag_final_and(forward, reverse)
    with pytest.raises(ValueError, match="links='both': must be one of forward, reverse, intersection"):
        AttentionChoice(links="both").check(1, 1)


def test_the_corpus_grid_adds_pairs_up_counts_the_pairs_left_out_and_merges_shares():
    from nmt.alignment.aer import AERGrid

    src, tgt = ["▁le", "▁ch", "at", "▁dort"], ["▁the", "▁sle", "eps"]
    sure, possible = {(0, 0), (2, 1)}, {(1, 0), (1, 1)}
    maps = [(torch.rand(3, 4, 3, 4, generator=torch.Generator().manual_seed(s)) * 4).softmax(-1) for s in range(6)]
    whole, shares = AERGrid(), [AERGrid(), AERGrid()]
    for k, w in enumerate(maps):
        words = (3, 2) if k != 4 else (4, 2)  # pair 4's pieces do not form its gold words: left out
        whole.add(aer_grid(w, src, tgt, sure, possible, words))
        shares[k % 2].add(aer_grid(w, src, tgt, sure, possible, words))
    expected = sum(aer_grid(w, src, tgt, sure, possible, (3, 2)) for k, w in enumerate(maps) if k != 4)
    assert torch.equal(whole.counts, expected) and whole.skipped == 1
    merged = AERGrid.merged(shares)
    assert torch.equal(merged.counts, whole.counts) and merged.skipped == 1
    assert torch.equal(whole.aers(), AERCounts.aers(expected)) and AERGrid().aers() is None
    assert AERGrid.merged([AERGrid(), AERGrid(skipped=2)]).counts is None
