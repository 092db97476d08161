"""The report as a document of sections, rendered as markdown (`reports/summary.md`) and as one
self-contained HTML page (`reports/index.html`) from the same blocks.

Inline text uses two bits of markdown, which the HTML renderer translates: `code` and
[text](relative link)."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Table:
    """A table of text cells; its first `left` columns are left-aligned, the others right."""

    header: list[str]
    rows: list[list[str]]
    left: int = 1
    caption: str = ""  # HTML only: a short title above it
    split: int = 1  # HTML only: its rows split into this many tables side by side


@dataclass(frozen=True)
class Figure:
    """A PNG: `path` relative to the report (markdown links it; HTML embeds its bytes)."""

    path: str
    alt: str
    caption: str = ""
    width: str = "100%"  # HTML: its largest width on the page


@dataclass(frozen=True)
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Callout:
    """A paragraph set apart: a warning the reader must not miss."""

    text: str


@dataclass(frozen=True)
class Quote:
    """Text shown as written (the model's output): `lead` in bold, a space, then `text`."""

    lead: str
    text: str


@dataclass(frozen=True)
class Facts:
    """Name -> value pairs (what ran)."""

    items: list[tuple[str, str]]


@dataclass(frozen=True)
class Gallery:
    """Figures side by side (HTML); one after another in markdown."""

    figures: list[Figure]


Block = str | Table | Figure | Bullets | Callout | Quote | Facts | Gallery


@dataclass
class Section:
    id: str  # the HTML anchor
    title: str
    blocks: list[Block] = field(default_factory=list)


# --- markdown ---------------------------------------------------------------------------------

def _md_row(cells: Sequence[str]) -> str:
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


NOT_RUN = "not run: "  # a cell that says why a figure is missing: prose, too wide for a cell


def markdown_table(table: Table) -> list[str]:
    """The table; a cell that says why it did not run is cut to "not run (n)", and the reasons
    follow the table, each once, so that its columns stay narrow."""
    reasons: list[str] = []

    def cell(text: str) -> str:
        if not text.startswith(NOT_RUN):
            return text
        reason = text.removeprefix(NOT_RUN)
        if reason not in reasons:
            reasons.append(reason)
        return f"not run ({reasons.index(reason) + 1})"

    rule = ["---"] * table.left + ["---:"] * (len(table.header) - table.left)
    rows = [_md_row([cell(c) for c in row]) for row in table.rows]
    notes = ["", *(f"- ({i}) {reason}" for i, reason in enumerate(reasons, 1))]
    return [_md_row(table.header), f"|{'|'.join(rule)}|", *rows, *(notes if reasons else [])]


def _md_block(block: Block) -> list[str]:
    if isinstance(block, str):
        return [block]
    if isinstance(block, Table):
        return markdown_table(block)
    if isinstance(block, Figure):
        return [f"![{block.alt}]({block.path})"]
    if isinstance(block, Bullets):
        return [f"- {item}" for item in block.items]
    if isinstance(block, Callout):
        return [f"> **{block.text}**"]
    if isinstance(block, Quote):
        first, *rest = f"**{block.lead}** {block.text}".splitlines()
        return [f"> {first}", *(f"> {line}" if line else ">" for line in rest)]
    if isinstance(block, Facts):
        return [f"- {name}: {value}" for name, value in block.items]
    if isinstance(block, Gallery):
        return [line for figure in block.figures for line in _md_block(figure)]
    raise TypeError(f"not a report block: {block!r}")


def markdown_section(section: Section) -> list[str]:
    """`## title`, then each block followed by a blank line."""
    lines = [f"## {section.title}", ""]
    for block in section.blocks:
        lines += [*_md_block(block), ""]
    return lines


def markdown(title: str, sections: Sequence[Section], lead: Sequence[Block] = ()) -> str:
    lines = [f"# {title}", ""]
    for block in lead:
        lines += [*_md_block(block), ""]
    for section in sections:
        lines += markdown_section(section)
    return "\n".join(lines).rstrip("\n") + "\n"


_FIGURE_LINE = re.compile(r"^!\[([^\]]*)\]\(([^)\s]+)\)$", re.MULTILINE)
_FILE_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")


def self_contained(text: str, folder: Path) -> str:
    """Markdown as `markdown` writes it, its paths relative to `folder`, for a viewer that
    cannot follow them (the Prefect UI): each figure's PNG embedded as a data URI, each link to
    a file reduced to its text."""
    text = _FILE_LINK.sub(r"\1", text)
    return _FIGURE_LINE.sub(lambda m: f"![{m.group(1)}]({png_data_uri(folder / m.group(2))})",
                            text)


# --- HTML -------------------------------------------------------------------------------------

_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def inline(text: str) -> str:
    """`text` escaped for HTML, its `code` and [text](link) translated. A link to anything
    but a relative path is refused: the page references nothing outside the run."""
    out = html.escape(text, quote=True)

    def link(match: re.Match[str]) -> str:
        target = html.unescape(match.group(2))
        if _EXTERNAL.match(target) or target.startswith("//"):
            raise ValueError(f"report link {target!r}: only relative links to the run's files")
        return f'<a href="{html.escape(target, quote=True)}">{match.group(1)}</a>'

    out = _LINK.sub(link, out)
    return _CODE.sub(r"<code>\1</code>", out)


def png_data_uri(path: Path) -> str:
    data = path.read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError(f"{path}: not a PNG file")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def html_table(table: Table) -> str:
    def kind(i: int, text: str) -> str:
        if text.startswith(NOT_RUN):
            return "note"  # prose: wraps
        return "l" if i < table.left else "r"

    def cells(tag: str, row: Sequence[str]) -> str:
        return "".join(f'<{tag} class="{kind(i, c)}">{inline(c)}</{tag}>'
                       for i, c in enumerate(row))

    def one(rows: Sequence[Sequence[str]], caption: str) -> str:
        shown = f"<caption>{inline(caption)}</caption>" if caption else ""
        body = "".join(f"<tr>{cells('td', row)}</tr>" for row in rows)
        return (f"<table>{shown}<thead><tr>{cells('th', table.header)}</tr></thead>"
                f"<tbody>{body}</tbody></table>")

    if table.split <= 1 or len(table.rows) < 2 * table.split:
        return f'<div class="table-wrap">{one(table.rows, table.caption)}</div>'
    size = -(-len(table.rows) // table.split)
    parts = [one(table.rows[i:i + size], table.caption if i == 0 else "\u00a0")
             for i in range(0, len(table.rows), size)]
    return f'<div class="table-wrap tables">{"".join(parts)}</div>'


def html_figure(figure: Figure, folder: Path) -> str:
    """The figure's PNG (`folder`: the report's folder) embedded as a data URI."""
    caption = f"<figcaption>{inline(figure.caption)}</figcaption>" if figure.caption else ""
    return (f'<figure style="max-width:{figure.width}"><img alt="{html.escape(figure.alt)}" '
            f'src="{png_data_uri(folder / figure.path)}">{caption}</figure>')


def html_block(block: Block, folder: Path) -> str:
    if isinstance(block, str):
        return f"<p>{inline(block)}</p>"
    if isinstance(block, Table):
        return html_table(block)
    if isinstance(block, Figure):
        return html_figure(block, folder)
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{inline(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Callout):
        return f'<p class="callout">{inline(block.text)}</p>'
    if isinstance(block, Quote):
        return (f'<blockquote class="sample"><strong>{html.escape(block.lead)}</strong> '
                f"{html.escape(block.text)}</blockquote>")
    if isinstance(block, Facts):
        return ('<dl class="facts">' + "".join(f"<dt>{html.escape(name)}</dt><dd>{inline(v)}</dd>"
                                               for name, v in block.items) + "</dl>")
    if isinstance(block, Gallery):
        return ('<div class="gallery">' + "".join(html_figure(f, folder) for f in block.figures)
                + "</div>")
    raise TypeError(f"not a report block: {block!r}")


def html_section(section: Section, folder: Path) -> str:
    body = "".join(html_block(block, folder) for block in section.blocks)
    return (f'<section id="{html.escape(section.id)}"><h2>{html.escape(section.title)}</h2>'
            f"{body}</section>")
