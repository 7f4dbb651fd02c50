"""One line of inline markup (HTML or XML) read into the text a model translates and the
tags to put back around its translation (:mod:`keras_nmt.text.tag_placement`), with the
standard library's parsers: ``html.parser`` (lenient) and expat (strict).

:func:`parse_markup` gives a :class:`Markup`: ``text`` (the line without tags, entities
decoded, whitespace kept) and ``nodes`` in order: an :class:`Element` per paired tag (its
span in ``text``, its tags byte for byte), an :class:`Item` per void tag, comment,
untranslated span (:attr:`MarkupOptions.keep`) or placeholder
(:attr:`MarkupOptions.placeholders`). Items are taken out of ``text`` (a space where one
stood between two non-space characters) and come back verbatim.

Malformed HTML is repaired or refused as docs/markup.md's table says (repairs counted in
``repairs``, refusals a :class:`MarkupError`); malformed XML and nesting deeper than
:data:`MAX_DEPTH` are a :class:`MarkupError`. Cost: linear in the line's length.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import html.parser
import re
import xml.parsers.expat
from typing import Sequence, Union

from keras_nmt.core.errors import MarkupError

KINDS = ("html", "xml")
MAX_DEPTH = 100
# HTML's void elements: no end tag, no content.
VOID_ELEMENTS = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input",
                           "link", "meta", "param", "source", "track", "wbr"))
KEEP_ELEMENTS = ("script", "style", "code", "pre")
PLACEHOLDERS = (r"\{[0-9]+\}", r"\{[A-Za-z_][A-Za-z0-9_]*\}",
                r"%(?:[0-9]+\$)?[-+ #0]*[0-9]*(?:\.[0-9]+)?[sdifxXeEgGcu%]",
                r"\$[A-Za-z_][A-Za-z0-9_]*")
_XML_ROOT = "keras-nmt-line"
_XML_START_TAG = re.compile(rb"<[^\s/>]+(?:\s+[^\s=]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*\s*/?>")
_END_TAG = re.compile(rb"</[^>]*>")


@dataclasses.dataclass(frozen=True)
class MarkupOptions:
    """``keep``: element names (besides :data:`KEEP_ELEMENTS`) whose content is not
    translated; ``placeholders``: regular expressions of text kept out of translation."""

    keep: tuple[str, ...] = ()
    placeholders: tuple[str, ...] = PLACEHOLDERS

    def keeps(self, name: str, attrs: Sequence[tuple[str, str | None]]) -> bool:
        return (name.lower() in KEEP_ELEMENTS or name in self.keep
                or any(k.lower() == "translate" and (v or "").lower() == "no" for k, v in attrs))

    def pattern(self) -> re.Pattern | None:
        """The placeholders as one expression (compiled once per set)."""
        return _alternatives(self.placeholders)


@functools.lru_cache(maxsize=32)
def _alternatives(patterns: tuple[str, ...]) -> re.Pattern | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


@dataclasses.dataclass
class Item:
    """Markup at one position of the text: a void tag, a comment, an untranslated span
    or a placeholder, ``raw`` as the line has it; whether text with whitespace at its
    end came right before it, and text starting with whitespace right after it."""

    position: int
    raw: str
    space_before: bool = False
    space_after: bool = False


@dataclasses.dataclass
class Element:
    """A paired tag around ``text[start:end]``: its start and end tags as written (a
    repaired element's end tag is ``</name>``), and the nodes inside it in order."""

    name: str
    start: int
    end: int
    open_tag: str
    close_tag: str = ""
    children: list["Node"] = dataclasses.field(default_factory=list)


Node = Union[Element, Item]


@dataclasses.dataclass(frozen=True)
class Markup:
    """A parsed line: the text to translate, its tag tree, and the repairs made."""

    text: str
    nodes: tuple[Node, ...]
    repairs: int = 0


@dataclasses.dataclass
class _Kept:
    """An untranslated element being read: where its raw text starts, its nesting."""

    name: str
    start: int
    depth: int = 1


@dataclasses.dataclass
class _Builder:
    """The state of one parse: the text so far, the open elements, the items waiting
    for the text after them, the untranslated element being read."""

    raw: str | bytes
    options: MarkupOptions
    text: list[str] = dataclasses.field(default_factory=list)
    length: int = 0
    stack: list[Element] = dataclasses.field(default_factory=list)
    nodes: list[Node] = dataclasses.field(default_factory=list)
    waiting: list[Item] = dataclasses.field(default_factory=list)
    after_text: bool = False
    separate: bool = False
    kept: _Kept | None = None
    repairs: int = 0

    def slice(self, start: int, end: int) -> str:
        found = self.raw[start:end]
        return found.decode("utf-8") if isinstance(found, bytes) else found

    def children(self) -> list[Node]:
        return self.stack[-1].children if self.stack else self.nodes

    def add_text(self, data: str) -> None:
        """Text, its placeholders taken out as items (matches of no width are none)."""
        pattern, cursor = self.options.pattern(), 0
        for match in pattern.finditer(data) if pattern else ():
            if match.end() > match.start():
                self._plain(data[cursor:match.start()])
                self.add_item(html.escape(match.group(), quote=False))
                cursor = match.end()
        self._plain(data[cursor:])

    def _plain(self, data: str) -> None:
        if not data:
            return
        if (self.separate and not data[0].isspace() and self.length
                and not self.text[-1][-1].isspace()):
            self.text.append(" ")
            self.length += 1
        for item in self.waiting:
            item.space_after = data[0].isspace()
        self.waiting, self.separate, self.after_text = [], False, True
        self.text.append(data)
        self.length += len(data)

    def add_item(self, raw: str) -> None:
        before = self.after_text and bool(self.text) and self.text[-1][-1].isspace()
        item = Item(self.length, raw, space_before=before)
        self.children().append(item)
        self.waiting.append(item)
        self.after_text, self.separate = False, True

    def tag_seen(self) -> None:
        self.waiting, self.after_text = [], False

    def open(self, name: str, raw: str) -> None:
        if len(self.stack) >= MAX_DEPTH:
            raise MarkupError(f"markup nested deeper than {MAX_DEPTH} elements")
        self.tag_seen()
        element = Element(name, self.length, self.length, raw)
        self.children().append(element)
        self.stack.append(element)

    def close(self, name: str, raw: str, column: int) -> None:
        names = [element.name for element in self.stack]
        if name not in names:
            raise MarkupError(f"end tag {raw} at column {column + 1} matches no open element")
        while self.stack[-1].name != name:
            self.repairs += 1
            self._pop(f"</{self.stack[-1].name}>")
        self._pop(raw)

    def _pop(self, raw: str) -> None:
        self.tag_seen()
        element = self.stack.pop()
        element.end, element.close_tag = self.length, raw

    def finish(self) -> Markup:
        if self.kept is not None:
            raise MarkupError(f"<{self.kept.name}> is never closed: its content, which is not "
                              "translated, has no end")
        while self.stack:
            self.repairs += 1
            self._pop(f"</{self.stack[-1].name}>")
        return Markup("".join(self.text), tuple(self.nodes), self.repairs)


class _HtmlReader(html.parser.HTMLParser):
    """html.parser's events into a :class:`_Builder` (positions are characters)."""

    def __init__(self, line: str, options: MarkupOptions):
        super().__init__(convert_charrefs=True)
        self.line, self.build = line, _Builder(line, options)
        starts = [0] + [i + 1 for i, c in enumerate(line) if c == "\n"]
        self.starts = starts

    def _at(self) -> int:
        row, column = self.getpos()
        return self.starts[row - 1] + column

    def handle_starttag(self, tag, attrs):
        build, raw = self.build, self.get_starttag_text()
        if build.kept is not None:
            build.kept.depth += tag == build.kept.name
        elif build.options.keeps(tag, attrs):
            build.kept = _Kept(tag, self._at())
        elif tag in VOID_ELEMENTS:
            build.add_item(raw)
        else:
            build.open(tag, raw)

    def handle_startendtag(self, tag, attrs):
        if self.build.kept is None:
            self.build.add_item(self.get_starttag_text())

    def handle_endtag(self, tag):
        build, at = self.build, self._at()
        end = self.line.find(">", at) + 1 or len(self.line)
        if build.kept is not None:
            build.kept.depth -= tag == build.kept.name
            if not build.kept.depth:
                start, build.kept = build.kept.start, None
                build.add_item(self.line[start:end])
        elif tag not in VOID_ELEMENTS:  # </br> is read as nothing
            build.close(tag, self.line[at:end], at)

    def handle_data(self, data):
        if self.build.kept is None:
            self.build.add_text(data)

    def _raw_item(self, raw: str) -> None:
        if self.build.kept is None:
            self.build.add_item(raw)

    def handle_comment(self, data):
        self._raw_item(f"<!--{data}-->")

    def handle_decl(self, data):
        self._raw_item(f"<!{data}>")

    def handle_pi(self, data):
        self._raw_item(f"<?{data}>")

    def unknown_decl(self, data):
        self._raw_item(f"<![{data}]>")


def parse_html(line: str, options: MarkupOptions = MarkupOptions()) -> Markup:
    """One line of HTML read as the module docstring says."""
    reader = _HtmlReader(line, options)
    reader.feed(line)
    reader.close()
    return reader.build.finish()


def parse_xml(line: str, options: MarkupOptions = MarkupOptions()) -> Markup:
    """One line of XML (a fragment: text and elements, under a root of its own) read as
    the module docstring says; :class:`MarkupError` when it is not well-formed."""
    document = f"<{_XML_ROOT}>{line}</{_XML_ROOT}>".encode("utf-8")
    build, parser = _Builder(document, options), xml.parsers.expat.ParserCreate()
    try:
        _xml_events(parser, document, build)
    except xml.parsers.expat.ExpatError as error:
        column = max(error.offset - len(_XML_ROOT) - 2, 0) + 1
        raise MarkupError(f"not well-formed XML at column {column}: "
                          f"{xml.parsers.expat.ErrorString(error.code)}") from None
    return build.finish()


def _xml_events(parser, document: bytes, build: _Builder) -> None:
    """Expat's events in document order into ``build``: start tags, end tags, text,
    comments and processing instructions (kept as items)."""
    stack: list[tuple[str, int, int, bool]] = []  # name, start, start tag's end, kept

    def start(name, attrs):
        at = parser.CurrentByteIndex
        tag_end = _XML_START_TAG.match(document, at).end()
        keep = bool(stack) and (stack[-1][3] or build.options.keeps(name, list(attrs.items())))
        stack.append((name, at, tag_end, keep))
        if name != _XML_ROOT and not keep:
            build.open(name, build.slice(at, tag_end))

    def end(name):
        name_, at, tag_end, keep = stack.pop()
        close, empty = parser.CurrentByteIndex, document[tag_end - 2:tag_end] == b"/>"
        close_end = tag_end if empty else _END_TAG.match(document, close).end()
        if name == _XML_ROOT or (keep and stack[-1][3]):
            return
        if keep:
            build.add_item(build.slice(at, close_end))
        elif empty:  # <x/>: a void item, not an element
            build.stack.pop()
            build.children().pop()
            build.add_item(build.slice(at, tag_end))
        else:
            build.close(name, build.slice(close, close_end), close)

    def other(ending: bytes):
        def handle(*_):
            if not stack[-1][3]:
                at = parser.CurrentByteIndex
                build.add_item(build.slice(at, document.index(ending, at) + len(ending)))
        return handle

    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.CharacterDataHandler = lambda data: None if stack[-1][3] else build.add_text(data)
    parser.CommentHandler, parser.ProcessingInstructionHandler = other(b"-->"), other(b"?>")
    parser.Parse(document, True)


def parse_markup(line: str, kind: str, options: MarkupOptions = MarkupOptions()) -> Markup:
    """``line`` read as ``kind`` ("html" or "xml"); :class:`MarkupError` for another kind."""
    if kind == "html":
        return parse_html(line, options)
    if kind == "xml":
        return parse_xml(line, options)
    raise MarkupError(f"unknown markup {kind!r}; known: {', '.join(KINDS)}")


def escape_text(text: str) -> str:
    """Text for markup: ``&``, ``<`` and ``>`` as entities (quotes left as they are)."""
    return html.escape(text, quote=False)
