"""Markup kept through translation: keras_nmt.text.markup (parsing), keras_nmt.text.tag_placement
(tags placed by attention) and keras_nmt.decoding.marked_up (the whole, over a translator)."""

import functools
import html.parser
import random

import numpy as np
import pytest

from keras_nmt.core.errors import MarkupError
from keras_nmt.decoding.marked_up import translate_marked_up
from keras_nmt.decoding.translation import Translation
from keras_nmt.text.markup import Element, Item, MarkupOptions, parse_html, parse_markup, parse_xml
from keras_nmt.text.tag_placement import (
    Alignment, aligned_sources, place_tags, token_spans,
)
from keras_nmt.text.word import detokenize, tokenize


def one_hot(links, sources):
    """An attention matrix [targets + 1, sources + 1] with each row on its linked source."""
    attention = np.zeros((len(links) + 1, sources + 1), np.float32)
    for j, i in enumerate(links):
        attention[j, i] = 1.0
    attention[-1, -1] = 1.0
    return attention


def placed(line, target_tokens, links, kind="html", lang="en"):
    """``line`` parsed, its text tokenized, the target tokens detokenized, tags placed."""
    markup = parse_markup(line, kind)
    source = tokenize(markup.text, lang)
    target = detokenize(target_tokens, "fr")
    alignment = Alignment(token_spans(markup.text, source), target,
                          token_spans(target, target_tokens),
                          aligned_sources([(len(target_tokens), len(source),
                                            one_hot(links, len(source)))]))
    return place_tags(markup, alignment)


# --- parsing ---

def test_html_text_tags_and_attributes_byte_for_byte():
    markup = parse_html('Click <a  href="x?a=1&amp;b" class=\'k\'>here</a > &amp; go')
    assert markup.text == "Click here & go"
    (element, ) = markup.nodes
    assert (element.start, element.end) == (6, 10)
    assert element.open_tag == '<a  href="x?a=1&amp;b" class=\'k\'>'
    assert element.close_tag == "</a >"
    assert markup.repairs == 0


def test_void_tags_code_and_placeholders_are_items_out_of_the_text():
    markup = parse_html("Hi {name},<br> run <code>ls &lt;x&gt;</code> now %1$d $HOME")
    assert markup.text == "Hi , run  now  "
    assert [(n.position, n.raw) for n in markup.nodes] == [
        (3, "{name}"), (4, "<br>"), (9, "<code>ls &lt;x&gt;</code>"), (14, "%1$d"),
        (15, "$HOME")]


def test_translate_no_and_configured_elements_are_kept():
    markup = parse_html('a <span translate="no">b</span> <var>c</var> d',
                        MarkupOptions(keep=("var",)))
    assert markup.text == "a   d"
    assert [n.raw for n in markup.nodes] == ['<span translate="no">b</span>', "<var>c</var>"]


def test_a_removed_item_between_words_leaves_a_space():
    assert parse_html("one<br>two").text == "one two"
    assert parse_html("one <br>two").text == "one two"


def test_nesting_is_recorded():
    markup = parse_html("<b>x <i>y</i></b> z")
    (bold,) = markup.nodes
    assert (bold.name, bold.start, bold.end) == ("b", 0, 3)
    assert [(c.name, c.start, c.end) for c in bold.children] == [("i", 2, 3)]


def test_xml_self_closing_entities_and_errors():
    markup = parse_xml('<g id="1">a &amp; b</g><x/> c')
    assert markup.text == "a & b c"
    assert markup.nodes[0].open_tag == '<g id="1">'
    assert isinstance(markup.nodes[1], Item) and markup.nodes[1].raw == "<x/>"
    for bad in ("<b>x</i>", "&nbsp;", "<b>x", "a < b"):
        with pytest.raises(MarkupError, match="not well-formed XML"):
            parse_xml(bad)


@pytest.mark.parametrize("line, text, repairs", [
    ("<b>bold", "bold", 1),  # unclosed: closed at the end
    ("<p>a<b>b</p>c", "abc", 1),  # closed with its parent
    ("AT&T & co", "AT&T & co", 0),  # stray &
    ("a < b", "a < b", 0),  # stray <
    ("<foo>x</foo>", "x", 0),  # unknown tag
])
def test_html_repairs(line, text, repairs):
    markup = parse_html(line)
    assert (markup.text, markup.repairs) == (text, repairs)


def test_html_stray_end_tag_and_misnesting_are_one_line_errors():
    for bad in ("x</b>", "<b><i>x</b></i>"):
        with pytest.raises(MarkupError, match="matches no open element") as caught:
            parse_html(bad)
        assert "\n" not in str(caught.value)


def test_unknown_markup_kind():
    with pytest.raises(MarkupError, match="unknown markup 'svg'"):
        parse_markup("x", "svg")


# --- placement ---

def test_token_spans_read_tokens_off_the_text():
    assert token_spans("Don't stop.", ["Do", "n't", "stop", "."]) == [
        (0, 2), (2, 5), (6, 10), (10, 11)]
    assert token_spans("a b", ["\u2581a", "\u2581b", "zz"]) == [(0, 1), (2, 3), (3, 3)]


def test_a_tag_around_a_word_wraps_the_word_aligned_to_it():
    # the red car -> la voiture rouge; <b> around "red" lands around "rouge"
    result = placed("the <b>red</b> car", ["la", "voiture", "rouge"], [0, 2, 1])
    assert result == ("la voiture <b>rouge</b>", 0)


def test_a_void_tag_lands_at_its_aligned_position():
    result = placed("hello<br> world", ["bonjour", "monde"], [0, 1])
    assert result.text == "bonjour<br> monde"
    result = placed("hello <br>world", ["bonjour", "monde"], [0, 1])
    assert result.text == "bonjour <br>monde"


def test_nested_tags_keep_their_order():
    result = placed("<b>big <i>red</i> car</b> now", ["grosse", "voiture", "rouge", "maintenant"],
                    [0, 2, 1, 3])
    assert result.text == "<b>grosse voiture <i>rouge</i></b> maintenant"


def test_code_and_placeholders_come_back_verbatim_and_once():
    result = placed("Run <code>a&amp;&lt;b</code> for {user} now", ["Lancez", "pour",
                                                                 "maintenant"], [0, 1, 2])
    assert result.text == "Lancez <code>a&amp;&lt;b</code> pour {user} maintenant"


def test_entities_are_decoded_for_the_model_and_encoded_again():
    markup = parse_html("<b>Tom &amp; Jerry</b> &lt;3")
    assert markup.text == "Tom & Jerry <3"
    result = placed("<b>Tom &amp; Jerry</b> &lt;3", ["Tom", "&", "Jerry", "<", "3"],
                    [0, 1, 2, 3, 4])
    assert result.text == "<b>Tom &amp; Jerry</b> &lt; 3"  # the detokenizer spaces "< 3"


def test_no_aligned_target_falls_back_to_the_relative_place():
    # every target token attends to "a": <b> around "c" has no target of its own
    result = placed("a b <b>c</b> d", ["w", "x", "y", "z"], [0, 0, 0, 0])
    assert result == ("w x <b>y</b> z", 1)


def test_sentences_of_a_line_are_blocks_of_the_attention():
    first = one_hot([1, 0], 2)
    second = one_hot([0], 1)
    assert aligned_sources([(2, 2, first), (1, 1, second), (1, 0, None)]) == [1, 0, 2, -1]


# --- properties ---

WORDS = ("alpha", "beta", "gamma", "delta", "and", "the", "x", "R&D", "a<b")


def random_markup(rng, depth=0):
    """A random line of words and nested tags; the plain text is not needed."""
    parts = []
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        if choice < 0.25 and depth < 4:
            name = rng.choice(("b", "i", "a", "span", "em"))
            attrs = rng.choice(("", ' href="x&amp;y"', " class='c'"))
            parts.append(f"<{name}{attrs}>{random_markup(rng, depth + 1)}</{name}>")
        elif choice < 0.35:
            parts.append(rng.choice(("<br>", "<img src='i.png'>", "{0}", "%s", "$VAR",
                                     "<code>k&lt;</code>", "<!-- c -->")))
        else:
            parts.append(html_escape(rng.choice(WORDS)))
    return rng.choice((" ", "", "  ")).join(parts)


def html_escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;")


class TreeReader(html.parser.HTMLParser):
    """The tag tree of a line as nested tuples, by the standard library's parser."""

    VOID = ("br", "img")

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = [[]]

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            self.stack[-1].append((tag, self.get_starttag_text()))
        else:
            self.stack.append([(tag, self.get_starttag_text())])

    def handle_endtag(self, tag):
        node = self.stack.pop()
        assert node[0][0] == tag
        self.stack[-1].append(tuple(node))

    def handle_comment(self, data):
        self.stack[-1].append(("!--", data))


def tree(line):
    reader = TreeReader()
    reader.feed(line)
    reader.close()
    assert len(reader.stack) == 1
    return reader.stack[0]


def random_placement(rng, line, kind="html"):
    markup = parse_markup(line, kind)
    source = tokenize(markup.text, "en")
    target_tokens = [rng.choice(WORDS[:6] + ("&", "<", ">")) for _ in range(rng.randint(0, 8))]
    target = detokenize(target_tokens, "fr")
    attention = rng.random() < 0.9 and source
    matrix = (np.asarray([[rng.random() for _ in range(len(source) + 1)]
                          for _ in range(len(target_tokens) + 1)]) if attention else None)
    alignment = Alignment(token_spans(markup.text, source), target,
                          token_spans(target, target_tokens),
                          aligned_sources([(len(target_tokens), len(source), matrix)]))
    return place_tags(markup, alignment)


def test_random_markup_keeps_its_tag_tree():
    rng = random.Random(73)
    for _ in range(1000):
        line = random_markup(rng)
        output = random_placement(rng, line).text
        assert tree(output) == tree(line), (line, output)
        for held in ("{0}", "%s", "$VAR", "<code>k&lt;</code>"):
            assert output.count(held) == line.count(held), (line, output)


def test_random_xml_keeps_its_tag_tree():
    rng = random.Random(75)
    for _ in range(300):
        line = random_markup(rng).replace("<br>", "<br/>").replace("'i.png'>", "'i.png'/>")
        output = random_placement(rng, line, "xml").text
        assert shape(parse_xml(output).nodes) == shape(parse_xml(line).nodes), (line, output)


def test_malformed_markup_is_an_error_or_well_formed():
    rng = random.Random(74)
    alphabet = ("<b>", "</b>", "<i>", "</i>", "<", ">", "&", "&amp;", "&bogus;", "<br>",
                "</br>", "<x y='", "'>", "word", " ", "<!--", "-->", "<code>", "</code>",
                "{0}", "</", "<p>", "é")
    for n in range(500):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        kind = ("html", "xml")[n % 2]
        try:
            markup = parse_markup(line, kind)
        except MarkupError as error:
            assert "\n" not in str(error)
            continue
        if kind == "html":
            output = random_placement(rng, line).text
            again = parse_html(output)  # well-formed: read again without a repair
            assert (again.repairs, shape(again.nodes)) == (0, shape(markup.nodes)), (line, output)


def shape(nodes):
    """A parsed tag tree without positions: tags as written, items' raw text, in order."""
    return [(node.open_tag, node.close_tag, shape(node.children)) if isinstance(node, Element)
            else node.raw for node in nodes]


# --- the whole, over a translator ---

def fake_translate(texts):
    """Each text's words reversed, attention on the mirrored word: a stand-in translator."""
    results = []
    for text in texts:
        source = tokenize(text, "en")
        tokens = tuple(reversed(source))
        links = list(reversed(range(len(source))))
        results.append(Translation(detokenize(tokens, "fr"), tokens, 0.0, tuple(source),
                                   one_hot(links, len(source)) if source else None))
    return results


def test_translate_marked_up_over_a_translator():
    (found,) = translate_marked_up(fake_translate, ["<b>one</b> two <i>three</i>"], "html")
    assert found.text == "<i>three</i> two <b>one</b>" or found.fallbacks > 0
    assert tree(found.text) == tree("<b>one</b> two <i>three</i>")
    with pytest.raises(MarkupError, match="line 2: "):
        translate_marked_up(fake_translate, ["ok", "<b>x</i>"], "xml")


@pytest.fixture(scope="module")
def translator(tiny_run):
    from keras_nmt.decoding.keras_translator import Translator

    return Translator.from_run_dir(tiny_run)


def test_the_keras_translator_keeps_the_tags(translator):
    lines = ['the <b>man</b> is <a href="x&amp;y">here</a>.<br> {0} It is <code>a&lt;b</code>.']
    translate = functools.partial(translator.translate, with_attention=True, beam_size=2)
    (found,) = translate_marked_up(translate, lines, "html")
    assert tree(found.text) == tree(lines[0])
    assert '<a href="x&amp;y">' in found.text and found.text.count("{0}") == 1
    assert "<code>a&lt;b</code>" in found.text


def test_the_translate_command_keeps_the_tags(tiny_run):
    import io

    from keras_nmt.cli.translate import main

    line = "the <b>man</b> is here.<br> The dog {0}."
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main([str(tiny_run), "--beam", "2", "--quiet", "--markup", "html"],
                stdin=io.BytesIO(line.encode() + b"\n<i>x</b>\n"), stdout=stdout,
                stderr=stderr) == 2
    assert stderr.getvalue().count("\n") == 1 and "matches no open element" in stderr.getvalue()
    stdout = io.StringIO()
    assert main([str(tiny_run), "--beam", "2", "--quiet", "--markup", "html"],
                stdin=io.BytesIO(line.encode() + b"\n"), stdout=stdout,
                stderr=io.StringIO()) == 0
    (output,) = stdout.getvalue().splitlines()
    assert tree(output) == tree(line) and output.count("{0}") == 1


def test_the_onnx_translator_keeps_the_tags(tiny_export):
    from keras_nmt.decoding.onnx_translator import OnnxTranslator

    served = OnnxTranslator.from_export_dir(tiny_export)
    line = 'the <b>man</b> is <a href="x&amp;y">here</a>.'
    (found,) = translate_marked_up(functools.partial(served.translate, align=True), [line],
                                   "html")
    assert tree(found.text) == tree(line)
