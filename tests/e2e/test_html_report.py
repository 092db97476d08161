"""reports/index.html: one self-contained page (every image an embedded PNG, no reference outside
the run, every section present), and what a real browser (headless Chromium) draws of it."""

from __future__ import annotations

import io
import re
import shutil
import struct
import subprocess
import zlib
from base64 import b64decode
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from gpt1.reporting.document import self_contained
from tasks import report
from tests.conftest import skip_outside_ci
from tests.report_fixtures import FILES, PARAMS, write_run

SECTIONS = ["run", "headline", "pretraining", "finetuning", "table5", "transfer", "zero-shot",
            "heldout", "generated", "files"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HEADER_COLOUR = (0x1F, 0x2A, 0x44)  # the page's header band (gpt1.reporting.page.CSS)


class Page(HTMLParser):
    """Every tag of the page with its attributes, and the text inside each element id'd."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.quoted = ""
        self._in_quote = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "blockquote":
            self._in_quote += 1
        elif self._in_quote and tag not in ("strong",):
            raise AssertionError(f"markup <{tag}> inside the model's text: not escaped")

    def handle_endtag(self, tag: str) -> None:
        if tag == "blockquote":
            self._in_quote -= 1

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_quote:
            self.quoted += data


def png_size(data: bytes) -> tuple[int, int]:
    """A PNG's width and height, checking each chunk's CRC and that its image data inflates:
    read by hand, without the library that wrote it."""
    assert data.startswith(PNG_SIGNATURE)
    pos, chunks, idat = len(PNG_SIGNATURE), [], b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind!r}"
        chunks.append(kind)
        if kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND" and b"IDAT" in chunks
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
    raw = zlib.decompress(idat)
    assert len(raw) == height * (1 + width * channels * depth // 8)  # a filter byte per row
    return width, height


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report stage run on the fixtures' files, with the model and prediction files its
    links point to."""
    root = tmp_path_factory.mktemp("run")
    write_run(root)
    (root / FILES.pretrain_model).mkdir(parents=True)
    (root / FILES.pretrain_model / "model.safetensors").write_bytes(b"weights")
    for task, split in (("sst2", "dev"), ("mrpc", "dev"), ("mnli", "dev"),
                        ("mnli", "dev_mismatched"), ("cola", "dev")):
        folder = root / FILES.finetune_models / task
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{split}_predictions.tsv").write_text("index\tprediction\n")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    mp.delenv("DVC_ROOT", raising=False)
    try:
        report.run(PARAMS)
    finally:
        mp.undo()
    return root


@pytest.fixture(scope="module")
def page(built: Path) -> Page:
    parsed = Page()
    parsed.feed((built / "reports" / "index.html").read_text(encoding="utf-8"))
    parsed.close()
    return parsed


def test_every_section_is_there_in_order(page: Page) -> None:
    ids = [attrs["id"] for tag, attrs in page.tags if tag == "section"]
    assert ids == SECTIONS
    headings = " ".join(page.text)
    for title in ("What ran", "Headline results", "Ablations (Table 5)",
                  "Layers transferred (Figure 2, left)", "Text the pretrained model writes"):
        assert title in headings
    assert ("These figures exercise the code on a small synthetic sample" in headings) is \
        PARAMS.ingest.root.endswith("sample_data")
    nav = [attrs["href"] for tag, attrs in page.tags if tag == "a" and
           (attrs.get("href") or "").startswith("#")]
    assert nav == [f"#{s}" for s in SECTIONS]


def test_every_image_is_an_embedded_png(page: Page) -> None:
    images = [attrs for tag, attrs in page.tags if tag == "img"]
    # pretraining, fine-tuning summary, SST-2's curves, Table 5, Figure 2 left and right
    assert len(images) == 6
    for attrs in images:
        src = attrs["src"] or ""
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix), src[:40]
        data = b64decode(src[len(prefix):], validate=True)
        width, height = png_size(data)
        assert 300 <= width <= 2000 and 200 <= height <= 1000
        pixels = matplotlib.image.imread(io.BytesIO(data), format="png")
        assert pixels.shape[:2] == (height, width) and pixels.std() > 0.05
        assert attrs["alt"]


def test_no_reference_outside_the_run(built: Path, page: Page) -> None:
    text = (built / "reports" / "index.html").read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text and "file:" not in text
    assert "url(" not in text and "@import" not in text  # CSS fetches nothing either
    assert not [tag for tag, _ in page.tags if tag in ("script", "link", "iframe", "object",
                                                       "embed", "source", "video", "audio")]
    links = []
    for _, attrs in page.tags:
        for name in ("src", "href", "srcset", "action", "poster", "data"):
            value = attrs.get(name)
            if value is None or (name == "src" and value.startswith("data:image/png;base64,")):
                continue
            assert name == "href" and ":" not in value and not value.startswith("/"), value
            links.append(value)
    files = [link for link in links if not link.startswith("#")]
    assert len(files) >= 15
    for link in files:  # relative to reports/: every one is a file or folder of this run
        assert (built / "reports" / link).exists(), link
    assert "../artifacts/finetune/sst2/dev_predictions.tsv" in files
    assert "../metrics/pretrain.json" in files and "summary.md" in files


def test_the_models_text_is_escaped(page: Page) -> None:
    assert "she walked down to the harbour <b>alone</b>." in page.quoted
    assert page.quoted.startswith("the rain fell steadily that evening, and ")


def test_the_markdown_made_self_contained(built: Path) -> None:
    """reports/summary.md as the Prefect UI gets it (flows.publish): each figure's PNG in it,
    and no link to a file, which the UI could not follow; nothing else changed."""
    folder = built / "reports"
    summary = (folder / "summary.md").read_text(encoding="utf-8")
    text = self_contained(summary, folder)
    figure = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)$", re.MULTILINE)
    linked = figure.findall(summary)
    embedded = figure.findall(text)
    assert len(linked) >= 3 and [alt for alt, _ in embedded] == [alt for alt, _ in linked]
    for (_, path), (_, uri) in zip(linked, embedded, strict=True):
        head, _, data = uri.partition(",")
        assert head == "data:image/png;base64"
        assert b64decode(data) == (folder / path).read_bytes()
    prose = figure.sub("", text)
    assert "](" not in prose  # no link left
    assert "[SST-2](plots/sst2.png)" in summary and "| SST-2 |" in prose


def test_chromium_draws_the_page(built: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        skip_outside_ci("chromium not found (apt-get install chromium; .ci/run installs it)")
    shot = tmp_path / "page.png"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}",
                           f"--screenshot={shot}", "--window-size=1280,2000",
                           (built / "reports" / "index.html").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.is_file(), proc.stderr[-2000:]
    data = shot.read_bytes()
    assert png_size(data) == (1280, 2000)
    pixels = matplotlib.image.imread(io.BytesIO(data), format="png")[..., :3]
    assert pixels.std() > 0.1  # not a blank page
    # the styles applied: the header band's colour at its top left, white page below it
    assert np.allclose(pixels[5, 5] * 255, HEADER_COLOUR, atol=3)
    assert np.allclose(pixels[1990, 5], 1.0, atol=0.02)
    # text and tables drawn down the page, not only at its top
    for band in range(0, 2000, 400):
        assert pixels[band:band + 400].std() > 0.05, band
