"""The alignment viewer and the Pharaoh links: HTML structure, links against attention, and a real browser."""

import json
from html.parser import HTMLParser

import pytest
import torch

import align as align_cli
import translate as cli
from conftest import headless_chromium
from nmt import checkpoint
from nmt.alignment.choice import attention_map
from nmt.alignment.links import parse_links
from nmt.alignment.symmetrisation import COMBINATIONS
from nmt.alignment.words import attention_links, words_of
from nmt.inference.search import SearchOptions
from nmt.inference.translator import Translator

LINES = ["Le chat mange la pomme rouge.", "", "Est-ce que tu dors ?"]


class Structure(HTMLParser):
    """Every tag and attribute, and the text of the data script."""

    def __init__(self):
        super().__init__()
        self.tags, self.data, self._in_data = [], None, False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_data = tag == "script" and dict(attrs).get("id") == "data"

    def handle_data(self, data):
        if self._in_data:
            self.data = (self.data or "") + data

    def handle_endtag(self, tag):
        self._in_data = False


@pytest.fixture(scope="module")
def report(trained, tmp_path_factory):
    """translate.py --html and --alignments for the Luong model (it has self-attention), n-best 2."""
    out = tmp_path_factory.mktemp("viewer")
    (out / "in.fr").write_text("\n".join(LINES) + "\n")
    ckpt = str(trained["luong"] / "checkpoints" / "last.ckpt")
    args = ["--ckpt", ckpt, "--input", str(out / "in.fr"), "--beam-size", "3", "--nbest", "2"]
    assert cli.main([*args, "--html", str(out / "report.html"), "--alignments", str(out / "out.align")]) == 0
    return out, ckpt


def test_the_page_is_self_contained_and_carries_the_data(report):
    out, _ = report
    html = (out / "report.html").read_text()
    page = Structure()
    page.feed(html)
    for tag, attrs in page.tags:  # nothing is fetched: no external script, style, font or image
        assert "src" not in attrs and not (tag == "link" and "href" in attrs), (tag, attrs)
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    data = json.loads(page.data)
    sentences = data["steps"][0]["sentences"]
    assert len(sentences) == 2  # the empty line has nothing to show
    for s in sentences:
        assert 1 <= len(s["hypotheses"]) <= 2
        for h in s["hypotheses"]:
            assert len(h["cross"]) == len(h["out_pieces"]) and len(h["cross"][0]) == len(h["src_pieces"])
            assert len(h["word_cross"]) == len(h["out_words"]) and len(h["word_cross"][0]) == len(h["src_words"])
            assert len(h["self"]) == len(h["self"][0]) == len(h["in_pieces"])
    rows = (out / "out.align").read_text().split("\n")  # --alignments: the links of each line's best translation
    for s, row in zip(sentences, (rows[0], rows[2])):
        assert {tuple(link) for link in s["hypotheses"][0]["links"]} == parse_links(row)


def test_pharaoh_links_are_the_most_attended_words(report):
    out, ckpt = report
    rows = (out / "out.align").read_text().split("\n")[:-1]
    assert len(rows) == len(LINES) and rows[1] == ""
    module = checkpoint.load_checkpoint(ckpt)
    results = Translator(module.model, module.tokenizer, SearchOptions(beam_size=3, nbest=2)).translate(LINES)
    tok, choice = module.tokenizer, module.checkpoint.alignment  # what translate.py reads by default
    for row, r in zip(rows, results):
        if not r.parts:
            continue
        ((src_ids, hyps),) = r.parts
        pieces = tok.src_pieces(src_ids), tok.tgt_pieces(hyps[0].tokens)
        assert parse_links(row) == attention_links(
            attention_map(hyps[0].attention, choice), *pieces, links=choice.links
        )
        assert all(i < len(r.source.split()) and j < len(r.text.split()) for i, j in parse_links(row))
        assert words_of(pieces[0]) == r.source.split()


def test_links_of_a_split_line_number_words_across_parts(trained):
    module = checkpoint.load_checkpoint(trained["bahdanau"] / "checkpoints" / "last.ckpt")
    from nmt.inference.translator import Batching

    line = "Le petit chat mange la pomme rouge et le chien dort dans la maison."
    translator = Translator(module.model, module.tokenizer, SearchOptions(beam_size=1), Batching(max_src_len=6))
    (r,) = translator.translate([line])
    links = translator.links(r)
    assert len(r.parts) > 1 and max(i for i, _ in links) >= 6  # source words of the later parts
    assert sorted(j for _, j in links) == list(range(len(r.text.split())))
    # each part's own links, shifted by the words of the parts before it (counted from the decoded text)
    tok, expected, src_offset, tgt_offset = module.tokenizer, set(), 0, 0
    for ids, hyps in r.parts:
        pieces = tok.src_pieces(ids), tok.tgt_pieces(hyps[0].tokens)
        own = attention_links(attention_map(hyps[0].attention), *pieces) or set()
        expected |= {(i + src_offset, j + tgt_offset) for i, j in own}
        src_offset += len(tok.src.decode(ids).split())
        tgt_offset += len(tok.decode_tgt([hyps[0].tokens])[0].split())
    assert links == expected and src_offset == len(line.split())


@pytest.mark.slow
def test_a_person_hovers_toggles_and_sees_links_in_a_real_browser(report, tmp_path):
    driver = headless_chromium(tmp_path)
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    try:
        out, _ = report
        driver.get((out / "report.html").as_uri())
        data = json.loads(driver.find_element(By.ID, "data").get_attribute("textContent"))
        first = data["steps"][0]["sentences"][0]["hypotheses"][0]
        svg = driver.find_element(By.CSS_SELECTOR, "svg.heatmap")
        assert svg.get_attribute("data-kind") == "pieces"
        cell = svg.find_element(By.CSS_SELECTOR, 'rect.cell[data-row="0"][data-col="0"]')
        ActionChains(driver).move_to_element(cell).perform()
        tip = driver.find_element(By.ID, "tooltip")
        assert tip.is_displayed()
        want = f"{first['out_pieces'][0]} -> {first['src_pieces'][0]}: {first['cross'][0][0]:.3f}"
        assert tip.text.startswith(want), tip.text
        hot = svg.find_elements(By.CSS_SELECTOR, "text.label.hot")
        assert first["out_pieces"][0] in [h.text for h in hot]  # the hovered output piece and what it attended to
        strong = [p for p, w in zip(first["src_pieces"], first["cross"][0]) if w >= 0.1]
        assert set(strong) <= {h.text for h in hot}
        driver.find_element(By.ID, "words").click()
        svg = driver.find_element(By.CSS_SELECTOR, "svg.heatmap")
        assert svg.get_attribute("data-kind") == "words"
        labels = [t.text for t in svg.find_elements(By.CSS_SELECTOR, "text.label.y")]
        assert labels == first["out_words"]
        lines = driver.find_elements(By.CSS_SELECTOR, "svg.links")[0].find_elements(By.CSS_SELECTOR, "line.link")
        drawn = {(int(x.get_attribute("data-src")), int(x.get_attribute("data-tgt"))) for x in lines}
        assert drawn == {tuple(link) for link in first["links"]} and lines[0].is_displayed()
        driver.find_element(By.ID, "self").click()
        svg = driver.find_element(By.CSS_SELECTOR, "svg.heatmap")
        assert svg.get_attribute("data-kind") == "self"
        assert [t.text for t in svg.find_elements(By.CSS_SELECTOR, "text.label.x")] == first["in_pieces"]
    finally:
        driver.quit()


HOSTILE = [
    "<!-- un commentaire <script> jamais fermé",
    "</script><script>document.body.innerHTML = 'pwned'</script>",
    "a & b &amp; c <b>gras</b> \u2028 ligne \u2029 fin",
]


def hostile_report(path):
    """A viewer whose every text is markup: HTML comments, script tags, entities, JavaScript line separators."""
    from nmt.views.viewer import write_report

    sentences = []
    for text in HOSTILE:
        words = text.split()
        n = len(words)
        view = {
            "text": text, "score": -1.0, "src_pieces": words, "out_pieces": [*words, "</s>"],
            "cross": [[1.0 / n] * n for _ in range(n + 1)], "src_words": words, "out_words": words,
            "word_cross": [[1.0 / n] * n for _ in range(n)], "links": [[i, i] for i in range(n)],
            "self": None, "in_pieces": ["<s>", *words], "heads": [[[[1.0 / n] * n for _ in range(n + 1)]]],
            "choice": {"layer": 0, "head": None, "readout": "output"},
            "src_word_of": list(range(n)), "out_word_of": list(range(n)),
        }  # fmt: skip
        sentences.append({"source": text, "reference": text, "hypotheses": [view]})
    write_report(path, [("<!--", sentences)], "</title><script>alert(1)</script>")


@pytest.mark.slow
def test_any_text_is_shown_as_text_in_a_real_browser(tmp_path):
    hostile_report(tmp_path / "hostile.html")
    page = (tmp_path / "hostile.html").read_text()
    script = page[page.index('<script id="data"') :]
    assert "<!--" not in script[: script.index("</script>")] and "\u2028" not in page
    driver = headless_chromium(tmp_path)
    from selenium.webdriver.common.by import By

    try:
        driver.get((tmp_path / "hostile.html").as_uri())
        headings = [h.get_attribute("textContent") for h in driver.find_elements(By.TAG_NAME, "h2")]
        assert headings == [f"{n + 1}. {text}" for n, text in enumerate(HOSTILE)]  # every sentence, as text
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg.heatmap")) == len(HOSTILE)
        assert driver.find_element(By.ID, "title").get_attribute("textContent") == "</title><script>alert(1)</script>"
        assert not driver.find_elements(By.CSS_SELECTOR, "#sentences b")  # no markup became an element
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def transformer_report(trained, tmp_path_factory):
    """translate.py --html for the Transformer: two layers of four heads."""
    out = tmp_path_factory.mktemp("viewer_transformer")
    (out / "in.fr").write_text("Le chat mange la pomme rouge.\n")
    ckpt = str(trained["transformer"] / "checkpoints" / "last.ckpt")
    assert (
        cli.main(["--ckpt", ckpt, "--input", str(out / "in.fr"), "--beam-size", "2", "--html", str(out / "r.html")])
        == 0
    )
    return out / "r.html"


@pytest.mark.slow
def test_a_person_picks_a_layer_a_head_a_readout_and_links_in_a_real_browser(transformer_report, tmp_path):

    from nmt.alignment.choice import AttentionChoice

    driver = headless_chromium(tmp_path)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    try:
        driver.get(transformer_report.as_uri())
        data = json.loads(driver.find_element(By.ID, "data").get_attribute("textContent"))
        hyp = data["steps"][0]["sentences"][0]["hypotheses"][0]
        heads = torch.tensor(hyp["heads"])  # (layers, heads, T + 1, S)
        L, H = heads.shape[:2]
        layer, head = Select(driver.find_element(By.ID, "layer")), Select(driver.find_element(By.ID, "head"))
        readout, links_of = Select(driver.find_element(By.ID, "readout")), Select(driver.find_element(By.ID, "links"))
        assert [o.get_attribute("value") for o in layer.options] == [str(i) for i in range(L)] and L == 2
        assert [o.get_attribute("value") for o in head.options] == ["mean", *map(str, range(H))] and H == 4
        assert layer.first_selected_option.get_attribute("value") == str(hyp["choice"]["layer"])

        def drawn() -> tuple[torch.Tensor, set]:
            box = driver.find_element(By.CSS_SELECTOR, "div.hyp")
            cells = box.find_elements(By.CSS_SELECTOR, "svg.heatmap rect.cell")
            T, S = len(hyp["out_pieces"]), len(hyp["src_pieces"])
            weights = torch.tensor([float(c.get_attribute("data-weight")) for c in cells]).view(T, S)
            lines = box.find_elements(By.CSS_SELECTOR, "line.link")
            return weights, {(int(x.get_attribute("data-src")), int(x.get_attribute("data-tgt"))) for x in lines}

        assert [o.get_attribute("value") for o in links_of.options] == list(COMBINATIONS)
        choices = [AttentionChoice(0, 1, "input"), AttentionChoice(1, None, "output"), AttentionChoice(0, 3)]
        choices += [
            AttentionChoice(k % L, k % H, ("output", "input")[k % 2], name) for k, name in enumerate(COMBINATIONS)
        ]
        for choice in choices:
            layer.select_by_value(str(choice.layer))
            head.select_by_value("mean" if choice.head is None else str(choice.head))
            readout.select_by_value(choice.readout)
            links_of.select_by_value(choice.links)
            weights, links = drawn()
            expected = attention_map(heads, choice)  # what nmt.alignment reads for this choice
            assert torch.allclose(weights, expected, atol=6e-4), choice
            pieces = hyp["src_pieces"], hyp["out_pieces"][:-1]
            assert links == attention_links(expected, *pieces, links=choice.links), choice

        driver.find_element(By.ID, "grid").click()  # small multiples: every layer's heads and their mean
        smalls = driver.find_elements(By.CSS_SELECTOR, "div.hyp svg.small")
        assert len(smalls) == L * (H + 1)
        [target] = [s for s in smalls if (s.get_attribute("data-layer"), s.get_attribute("data-head")) == ("1", "2")]
        target.click()  # picks that map
        assert Select(driver.find_element(By.ID, "layer")).first_selected_option.get_attribute("value") == "1"
        assert Select(driver.find_element(By.ID, "head")).first_selected_option.get_attribute("value") == "2"
        assert "chosen" in driver.find_element(
            By.CSS_SELECTOR, 'svg.small[data-layer="1"][data-head="2"]'
        ).get_attribute("class")
        weights, _ = drawn()
        assert torch.allclose(weights, attention_map(heads, AttentionChoice(1, 2, "output")), atol=6e-4)
    finally:
        driver.quit()


@pytest.mark.slow
def test_a_run_s_viewer_opens_at_its_last_validation_s_choice_in_a_real_browser(transformer_report, tmp_path):
    """#82 §8: a run's page puts its slider on the last validation, and its selectors on that validation's choice
    (the one the checkpoint recorded), not the first step's."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from nmt.views.viewer import write_report

    page = transformer_report.read_text()
    data = json.loads(page[page.index('<script id="data"') :].split(">", 1)[1].split("</script>", 1)[0])
    [sentence] = data["steps"][0]["sentences"]
    first, last = {"layer": 0, "head": None, "readout": "input", "links": "union"}, \
        {"layer": 1, "head": 2, "readout": "output", "links": "intersection"}  # fmt: skip

    def chosen(choice: dict) -> dict:
        return {**sentence, "hypotheses": [{**h, "choice": {**h["choice"], **choice}} for h in sentence["hypotheses"]]}

    write_report(tmp_path / "run.html", [("step 8", [chosen(first)]), ("step 16", [chosen(last)])], "a run")
    driver = headless_chromium(tmp_path)
    try:
        driver.get((tmp_path / "run.html").as_uri())
        assert driver.find_element(By.ID, "step").get_attribute("value") == "1"  # the last validation
        shown = {name: Select(driver.find_element(By.ID, name)).first_selected_option.get_attribute("value")
                 for name in ("layer", "head", "readout", "links")}  # fmt: skip
        assert shown == {"layer": "1", "head": "2", "readout": "output", "links": "intersection"}, shown
    finally:
        driver.quit()


def test_align_options_pick_the_attention_and_bad_ones_are_one_line(trained, tmp_path, capsys):
    ckpt = str(trained["transformer"] / "checkpoints" / "last.ckpt")
    (tmp_path / "in.fr").write_text("Le chat mange la pomme rouge.\n")
    (tmp_path / "in.en").write_text("The cat eats the red apple.\n")
    base = ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), "--align-to", str(tmp_path / "in.en")]
    recorded = checkpoint.load_checkpoint(ckpt).checkpoint.alignment.links
    other = next(c for c in COMBINATIONS if c != recorded)  # the second reading joins its links otherwise
    outputs, translated = {}, {}
    for layer, head, readout, links in (("0", "1", "output", []), ("1", "mean", "input", ["--align-links", other])):
        chosen = ["--align-layer", layer, "--align-head", head, "--align-readout", readout, *links]
        assert align_cli.main([*base, *chosen]) == 0
        outputs[layer] = capsys.readouterr().out.strip()
        written = tmp_path / f"translated-{layer}.align"  # translate.py's links of its own translation
        assert cli.main([*base[:4], "--alignments", str(written), *chosen]) == 0
        translated[layer] = written.read_text().strip()
        capsys.readouterr()  # the translation itself
    # the links of the chosen attention, as nmt.alignment reads it
    from nmt.alignment.choice import AttentionChoice
    from nmt.alignment.links import pharaoh
    from nmt.inference.translator import Translator

    loaded = checkpoint.load_checkpoint(ckpt)
    for layer, choice in (
        ("0", AttentionChoice(0, 1, "output", recorded)),  # the recorded way to read links: no --align-links given
        ("1", AttentionChoice(1, None, "input", other)),
    ):
        translator = Translator(loaded.model, loaded.tokenizer, alignment=choice)
        [r] = translator.force(["Le chat mange la pomme rouge."], ["The cat eats the red apple."])
        assert outputs[layer] == pharaoh(translator.links(r))
        [t] = translator.translate(["Le chat mange la pomme rouge."])
        assert translated[layer] == pharaoh(translator.links(t))
    assert outputs["0"] != outputs["1"] and translated["0"] != translated["1"]
    for option, message in (
        (["--align-layer", "2"], "--align-layer=2: the model has 2 attention layer(s): 0 to 1"),
        (["--align-head", "4"], "--align-head=4: the model has 4 head(s): 0 to 3, or the mean"),
        (["--align-head", "first"], "--align-head='first': must be a head number (0, 1, ...) or mean"),
    ):
        assert align_cli.main([*base, *option]) != 0
        err = capsys.readouterr().err
        assert err.strip().splitlines()[-1] == f"error: {message}" and "Traceback" not in err
