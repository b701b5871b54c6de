"""Markdown (as models write it) to the HTML subset Telegram accepts.

Supported: **bold**/__two words__ (a lone __name__ stays a Python dunder),
*italic*/_italic_, ~~strike~~, `inline code`, fenced code with a language,
[links](https://…) (http, https and mailto only: any other link stays plain text),
headings (shown bold), > quotes, tables (shown monospaced). Lists stay text with "•"
bullets. Everything else is escaped, so a stray ``<`` or ``&`` in a reply can never
break the message. Tags are produced in pairs by construction; if Telegram still rejects
the result, the sender falls back to plain text.
"""

from __future__ import annotations

import html
import re

from adapters.chunking import find_code_fences, utf16_length

__all__ = ["markdown_to_telegram_html", "visible_length", "visible_text"]

_INLINE = re.compile(
    r"""
    (?P<code_ticks>`+)(?P<code>.+?)(?P=code_ticks)
  | \[(?P<link_text>[^\]\n]+)\]\((?P<link_url>(?:[^()\s]|\([^()\s]*\))+)\)
  | <(?P<autolink>https?://[^>\s]+)>
  | \*\*(?P<bold>(?![\s*]).+?(?<!\s))\*\*
  | (?<!\w)__(?P<bold_u>(?![\s_])[^\n]*?\s[^\n]*?(?<!\s))__(?!\w)
  | ~~(?P<strike>(?!\s).+?(?<!\s))~~
  | (?<![\w*])\*(?P<italic>(?![\s*]).*?[^\s*])\*(?![\w*])
  | (?<![\w_])_(?P<italic_u>(?![\s_]).*?[^\s_])_(?![\w_])
    """,
    re.VERBOSE,
)
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.*?)[ \t#]*$")
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+")
_QUOTE = re.compile(r"^[ \t]{0,3}>[ \t]?")
_TABLE_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
_SAFE_LANGUAGE = re.compile(r"^[\w+#.-]{1,32}$")
#: Links a reply may carry (docs/design.md#outbound-links): a tg:// link in model output
#: could be a text mention of any user under a made-up name, or a proxy to add.
_SAFE_URL = re.compile(r"^(https?://|mailto:)", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")


def markdown_to_telegram_html(text: str) -> str:
    """Convert one message's Markdown to Telegram HTML (parse_mode="HTML")."""
    out: list[str] = []
    pos = 0
    for fence in find_code_fences(text):
        out.append(_convert_blocks(text[pos : fence.open_start]))
        body_start = min(fence.open_end + 1, len(text))
        unclosed = fence.close_start == len(text)
        body_end = len(text) if unclosed else max(body_start, fence.close_start - 1)
        body = text[body_start:body_end]
        out.append(_code_block(body, fence.language))
        pos = min(fence.close_end + 1, len(text))
    out.append(_convert_blocks(text[pos:]))
    return "".join(out).strip("\n") or html.escape(text, quote=False)


def visible_length(telegram_html: str) -> int:
    """The length Telegram counts against its 4096 limit: text after entity parsing."""
    return utf16_length(visible_text(telegram_html))


def visible_text(telegram_html: str) -> str:
    """What a reader sees of the HTML: the text without tags or markup characters.

    This is the plain-text fallback too, so a rejected message never shows raw ``**``.
    """
    return html.unescape(_TAG.sub("", telegram_html))


def _code_block(body: str, language: str) -> str:
    code = html.escape(body, quote=False)
    if language and _SAFE_LANGUAGE.match(language):
        return f'<pre><code class="language-{language}">{code}</code></pre>\n'
    return f"<pre>{code}</pre>\n"


def _convert_blocks(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if _QUOTE.match(line):
            quoted = []
            while index < len(lines) and _QUOTE.match(lines[index]):
                quoted.append(_inline(_QUOTE.sub("", lines[index], count=1)))
                index += 1
            out.append("<blockquote>" + "\n".join(quoted) + "</blockquote>")
            continue
        if _TABLE_ROW.match(line):
            rows = []
            while index < len(lines) and _TABLE_ROW.match(lines[index]):
                rows.append(lines[index].strip())
                index += 1
            out.append("<pre>" + html.escape("\n".join(rows), quote=False) + "</pre>")
            continue
        out.append(_convert_line(line))
        index += 1
    return "\n".join(out)


def _convert_line(line: str) -> str:
    if heading := _HEADING.match(line):
        return f"<b>{_inline(heading.group(1))}</b>" if heading.group(1) else ""
    if bullet := _BULLET.match(line):
        return bullet.group(1) + "• " + _inline(line[bullet.end() :])
    return _inline(line)


def _inline(text: str) -> str:
    out: list[str] = []
    pos = 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[pos : match.start()], quote=False))
        out.append(_inline_span(match))
        pos = match.end()
    out.append(html.escape(text[pos:], quote=False))
    return "".join(out)


def _inline_span(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if match.group("code") is not None:
        return f"<code>{html.escape(match.group('code'), quote=False)}</code>"
    if match.group("link_text") is not None:
        url = match.group("link_url")
        if not _SAFE_URL.match(url):
            return html.escape(match.group(0), quote=False)
        return f'<a href="{html.escape(url, quote=True)}">{_inline(match.group("link_text"))}</a>'
    if kind == "autolink":
        url = match.group("autolink")
        return f'<a href="{html.escape(url, quote=True)}">{html.escape(url, quote=False)}</a>'
    tag = {"bold": "b", "bold_u": "b", "strike": "s", "italic": "i", "italic_u": "i"}[kind or ""]
    return f"<{tag}>{_inline(match.group(kind or ''))}</{tag}>"
