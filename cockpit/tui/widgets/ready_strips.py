"""A widget's picture turned into textual strips ahead of time, by any thread, so that showing it on the UI
thread is a swap.

Why: a chart is a rich Text with a style per cell (plotext's colours, the heat map's shades). Textual turns it
into Content (a style converted per span) and then into strips (a segment per run of one style) on the UI
thread, in ``Static.update`` and again when the frame is drawn: for a 64-rank heat map at 120x36 that was
~50 ms of CPU per key press (issue 29), time a key waits for. ``Paint.of(widget)`` reads on the UI thread
what textual renders the widget's content with (its size, base style, text rules, the app's ANSI theme);
``prepare`` does textual's own conversion with it anywhere (a worker); ``ReadyStrips.render_line`` hands the
strips back while the widget still has that paint, and renders as textual does when it has not (a resize,
another theme, a text selection).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.terminal_theme import TerminalTheme
from rich.text import Text
from textual.content import Content, Span
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions
from textual.widget import Widget

# the rules Content.render_strips reads from a widget's styles
_RULES = (("text_align", "left"), ("text_overflow", "fold"), ("text_wrap", "wrap"), ("line_pad", 0))


@dataclass(frozen=True)
class Paint:
    """What textual renders a widget's content with: its content width (its height only cuts the lines off,
    which the widget does as it asks for them), its base style, the text rules of its styles, the style
    lookup of its component classes, the app's console and ANSI theme. Equal paints give equal strips."""

    width: int
    style: Style
    rules: tuple[tuple[str, object], ...]
    get_style: Callable
    console: Console
    ansi_theme: TerminalTheme | None

    @classmethod
    def of(cls, widget: Widget, width: int | None = None) -> Paint:
        """``widget``'s paint now (UI thread); ``width``: the content width to prepare for (default: its own)."""
        rules = tuple((name, widget.styles.get(name, default)) for name, default in _RULES)
        return cls(widget.size.width if width is None else width, widget.visual_style, rules, widget._get_style,
                   widget.app.console, widget.app.ansi_theme)

    def fits(self, widget: Widget) -> bool:
        """Whether ``widget`` has this paint now (what ``of`` would say, without building one per line)."""
        styles = widget.styles
        return (self.width == widget.size.width and self.style == widget.visual_style
                and self.ansi_theme is widget.app.ansi_theme and self.console is widget.app.console
                and self.get_style == widget._get_style
                and all(styles.get(name, default) == value
                        for (name, value), (_, default) in zip(self.rules, _RULES, strict=True)))


@dataclass(frozen=True)
class Ready:
    """A picture as textual will show it: its Content (what ``Static.update`` takes) and its strips for
    ``paint``."""

    paint: Paint
    content: Content
    strips: tuple[Strip, ...]


def content_of(text: Text, paint: Paint) -> Content:
    """``text`` as textual's Content (as Content.from_rich_text makes it in the app: the app's ANSI theme
    maps the ANSI colours), without reading the running app, so that any thread may call it."""
    get_style, theme = paint.console.get_style, paint.ansi_theme
    # one textual Style per distinct rich style, not one per span: a heat map has a span per cell but a
    # handful of styles (each textual Style also carries caches of its own)
    made: dict = {}

    def style(s) -> Style:
        out = made.get(s)
        if out is None:
            out = made[s] = Style.from_rich_style(get_style(s) if isinstance(s, str) else s, theme)
        return out

    content = Content(text.plain, [Span(start, end, style(s)) for start, end, s in text.spans])
    if not text.style:
        return content
    return content.stylize_before(text.style if isinstance(text.style, str) else style(text.style))


def prepare(text: Text, paint: Paint) -> Ready:
    """``text`` turned into strips as textual would turn it in a widget with ``paint`` (Visual.to_strips with
    no selection, no links and the content aligned left-top, which is what the chart widgets have)."""
    content = content_of(text, paint)
    rules = dict(paint.rules)
    strips = content.render_strips(paint.width, None, paint.style,
                                   RenderOptions(paint.get_style, rules))  # type: ignore[arg-type]
    return Ready(paint, content, tuple(strips))


class ReadyStrips(Widget):
    """A widget that can show strips prepared elsewhere (``_ready``) while its paint is the one they were
    prepared for."""

    _ready: Ready | None = None

    def ready_paint(self, width: int | None = None) -> Paint:
        return Paint.of(self, width)

    def _fits(self) -> Ready | None:
        ready = self._ready
        if ready is None or self.text_selection is not None or self.styles.content_align != ("left", "top"):
            return None
        return ready if ready.paint.fits(self) else None

    def render_line(self, y: int) -> Strip:
        ready = self._fits()
        if ready is None:
            return super().render_line(y)
        if y < len(ready.strips):
            return ready.strips[y]
        return Strip.blank(self.size.width, self.visual_style.rich_style)
