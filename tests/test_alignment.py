import torch

from nmt.alignment import AERCounts, attention_links, parse_links, piece_words, word_attention


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
