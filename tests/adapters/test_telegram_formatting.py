"""Markdown as models write it -> the HTML subset Telegram accepts."""

from __future__ import annotations

import html
import re

import pytest

from adapters.telegram.formatting import markdown_to_telegram_html, visible_length


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("**bold** and __also this__", "<b>bold</b> and <b>also this</b>"),
        ("*it* and _it_", "<i>it</i> and <i>it</i>"),
        ("~~gone~~", "<s>gone</s>"),
        ("use `a < b && c`", "use <code>a &lt; b &amp;&amp; c</code>"),
        ("``x ` y``", "<code>x ` y</code>"),
        ("# Title", "<b>Title</b>"),
        ("### Sub **bold**", "<b>Sub <b>bold</b></b>"),
        (
            "see [docs](https://example.com/a?b=1&c=2)",
            'see <a href="https://example.com/a?b=1&amp;c=2">docs</a>',
        ),
        (
            "[wiki](https://en.wikipedia.org/wiki/Owl_(bird))",
            '<a href="https://en.wikipedia.org/wiki/Owl_(bird)">wiki</a>',
        ),
        ("<https://example.com>", '<a href="https://example.com">https://example.com</a>'),
        ("x < y > z & w", "x &lt; y &gt; z &amp; w"),
        ("<b>not a tag</b>", "&lt;b&gt;not a tag&lt;/b&gt;"),
        ("> quoted *text*\n> more", "<blockquote>quoted <i>text</i>\nmore</blockquote>"),
    ],
)
def test_inline_and_block_markup(markdown, expected):
    assert markdown_to_telegram_html(markdown) == expected


@pytest.mark.parametrize(
    "text",
    [
        "snake_case_name and __init__ stay",
        "2 * 3 * 4 = 24",
        "a*b*c",
        "**unclosed bold",
        "price: 5 $ _ 3",
        "[not a link](javascript:alert(1))",
    ],
)
def test_things_that_are_not_markup_stay_text(text):
    assert markdown_to_telegram_html(text) == html.escape(text, quote=False)


@pytest.mark.parametrize(
    "text",
    [
        "[Pavel Durov](tg://user?id=1)",  # a text mention of any user under any name
        "[free VPN](tg://proxy?server=evil.example&port=443&secret=ee00)",
        "[Settings](TG://settings)",
        "[run me](javascript:alert(1))",
        "[file](file:///etc/passwd)",
        "[x](data:text/html,hi)",
        "[rel](/relative/path)",
    ],
)
def test_only_http_and_mailto_links_are_rendered_others_stay_plain_text(text):
    # docs/design.md#outbound-links: the reader sees the link's target, not a made-up name
    assert markdown_to_telegram_html(text) == html.escape(text, quote=False)
    assert "<a " not in markdown_to_telegram_html(f"see {text} **now**")


@pytest.mark.parametrize(
    ("markdown", "href"),
    [
        ("[docs](http://example.com)", "http://example.com"),
        ("[Docs](HTTPS://example.com/x)", "HTTPS://example.com/x"),
        ("[write](mailto:owl@example.com)", "mailto:owl@example.com"),
    ],
)
def test_http_https_and_mailto_links_are_rendered(markdown, href):
    assert f'<a href="{href}">' in markdown_to_telegram_html(markdown)


def test_lists_stay_text_with_bullets():
    markdown = "- one\n* two *emph*\n  + nested\n1. first\n2. second"
    assert markdown_to_telegram_html(markdown) == (
        "• one\n• two <i>emph</i>\n  • nested\n1. first\n2. second"
    )


def test_fenced_code_keeps_language_and_escapes():
    markdown = 'Before\n\n```python\nif a < b and c > d:\n    print("&")\n```\nAfter **x**'
    assert markdown_to_telegram_html(markdown) == (
        "Before\n\n"
        '<pre><code class="language-python">if a &lt; b and c &gt; d:\n    print("&amp;")</code></pre>\n'
        "After <b>x</b>"
    )


def test_markup_inside_code_is_not_formatted():
    assert markdown_to_telegram_html("```\n**x** _y_\n```") == "<pre>**x** _y_</pre>"


def test_unsafe_language_tag_is_dropped():
    html_text = markdown_to_telegram_html('```js" onclick="x\ncode\n```')
    assert html_text == "<pre>code</pre>"


def test_tables_are_monospaced():
    markdown = "| a | b |\n|---|---|\n| 1 | <2> |"
    assert (
        markdown_to_telegram_html(markdown) == "<pre>| a | b |\n|---|---|\n| 1 | &lt;2&gt; |</pre>"
    )


def test_tags_are_always_balanced_and_visible_text_never_grows():
    samples = [
        "**a *b* c** `d` [e](https://f) ~~g~~",
        "***both*** **_mixed_** `**code**`",
        "# H\n> q **b**\n- l _i_\n```\nx\n```",
        "** * _ ~~ ` [ ] ( ) < > &",
    ]
    for sample in samples:
        html_text = markdown_to_telegram_html(sample)
        opened = sorted(re.findall(r"<(\w+)[^>]*>", html_text))
        assert opened == sorted(re.findall(r"</(\w+)>", html_text)), html_text
        assert visible_length(html_text) <= len(sample)
