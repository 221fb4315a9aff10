"""Dashboard charts as inline SVG, drawn by pygal.

Every chart is rendered without pygal's tooltip script (``js=[]``) and with its inline
configuration ``<script>`` removed, so the SVG embeds in a page whose Content-Security-
Policy forbids scripts; labels, legends and values are plain SVG text.
"""

from __future__ import annotations

import re
from datetime import date

_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.S)

PALETTE = ("#2f5fd0", "#c5221f", "#1e8e3e", "#b06000", "#7b3fc4", "#00838f", "#ad1457", "#5d4037", "#546e7a",
           "#9e9d24")


def _style(colors: tuple[str, ...] = PALETTE):
    from pygal.style import Style

    return Style(background="white", plot_background="white", foreground="#1d2330", foreground_strong="#1d2330",
                 foreground_subtle="#8a93a5", opacity=".85", opacity_hover="1", colors=colors,
                 font_family="DejaVu Sans, Liberation Sans, Arial, sans-serif", label_font_size=12,
                 major_label_font_size=12, legend_font_size=12, title_font_size=15, value_font_size=11)


def _config(**kw) -> dict:
    base = dict(style=_style(kw.pop("colors", PALETTE)), js=[], disable_xml_declaration=True, width=720, height=360,
                margin=12, margin_bottom=24, spacing=14,
                legend_at_bottom=True, legend_at_bottom_columns=4, truncate_legend=30, show_y_guides=True,
                print_values=False, explicit_size=False, pretty_print=False)
    base.update(kw)
    return base


def count_labels(top: int) -> list[int]:
    """Whole-number axis labels from 0 to at least ``top`` (at most about 10 of them)."""
    step = max(1, -(-max(top, 1) // 8))
    return list(range(0, max(top, 1) + step, step))


def spread(labels: list, most: int = 12) -> list:
    """At most ``most`` of ``labels``, evenly spaced, first and last kept."""
    if len(labels) <= most:
        return labels
    k = -(-len(labels) // most)
    return labels[::k] if labels[::k][-1] == labels[-1] else [*labels[::k], labels[-1]]


def render(chart) -> str:
    """The chart as an inline ``<svg>`` string with no script."""
    return _SCRIPT.sub("", chart.render(is_unicode=True))


def pass_rate_over_time(series: dict[str, list[tuple[date, float]]], title: str) -> str:
    """A line per version: ``{version: [(day, pass rate in %), ...]}``."""
    import pygal

    chart = pygal.DateLine(**_config(title=title, range=(0, 100), include_x_axis=True, dots_size=4,
                                     x_value_formatter=lambda d: d.strftime("%Y-%m-%d"), x_label_rotation=25,
                                     value_formatter=lambda v: f"{v:.0f}%", y_title="pass rate (%)"))
    for version, points in series.items():
        chart.add(version, sorted(points))
    chart.x_labels = spread(sorted({d for points in series.values() for d, _ in points}))
    return render(chart)


def runs_per_day(days: list[date], failing: list[int], passing: list[int], title: str) -> str:
    """Stacked bars: failing (red) and passing (green) runs per day (or week, month: ``days``
    are the buckets' first days)."""
    import pygal

    chart = pygal.StackedBar(**_config(title=title, x_label_rotation=25, y_title="runs", colors=("#c5221f", "#1e8e3e"),
                                       value_formatter=lambda v: f"{v:.0f}",
                                       show_minor_x_labels=len(days) <= 20, x_labels_major_count=12))
    chart.x_labels = [d.strftime("%Y-%m-%d") for d in days]
    chart.y_labels = count_labels(max((f + p for f, p in zip(failing, passing)), default=1))
    chart.add("failing", failing)
    chart.add("passing", passing)
    return render(chart)


def horizontal_counts(counts: list[tuple[str, int]], title: str, series: str) -> str:
    """One horizontal bar per label (``[(label, count)]``, drawn top to bottom)."""
    import pygal

    chart = pygal.HorizontalBar(**_config(title=title, show_legend=False, print_values=True,
                                          height=max(200, 60 + 34 * len(counts)),
                                          value_formatter=lambda v: f"{v:.0f}"))
    chart.x_labels = [label for label, _ in reversed(counts)]
    chart.y_labels = count_labels(max((n for _, n in counts), default=1))
    chart.add(series, [n for _, n in reversed(counts)])
    return render(chart)
