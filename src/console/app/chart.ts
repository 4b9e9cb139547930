// Charts: uPlot (one small, fast canvas library; no inline styles from the network, no fonts).
import uPlot from 'uplot'
import { useEffect, useRef, useState } from 'preact/hooks'
import { html } from './ui'

function cssVar(name: string) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888'
}

const dayOf = (date: string) => Date.parse(date + 'T00:00:00Z') / 1000
const dayFmt = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' })
/** `2026-11-20` → `Nov 20` (a UTC day, shown as that day whatever the browser's zone). */
export const dayLabel = (date: string) => dayFmt.format(new Date(date + 'T00:00:00Z'))

interface PlotSpec {
  xs: number[]
  /** One array per series, drawn in this order (a later series paints over an earlier one). */
  ys: number[][]
  /** CSS variable names of the series' colours. */
  colors: string[]
  labels: string[]
  max: number
  onHover?: (idx: number | null) => void
}

/** Draws daily bars into `el`; redraws on data, width and colour-scheme changes. */
function usePlot(box: { current: HTMLDivElement | null }, spec: () => PlotSpec, deps: unknown[]) {
  useEffect(() => {
    const el = box.current
    if (!el) return
    let plot: uPlot | null = null
    const draw = () => {
      plot?.destroy()
      const s = spec()
      const ink = cssVar('--muted')
      const grid = cssVar('--line')
      plot = new uPlot(
        {
          width: Math.max(260, el.clientWidth),
          height: 220,
          legend: { show: false },
          cursor: { y: false, points: { show: false } },
          // Half a day either side, so the first and last days' bars are whole.
          scales: { x: { time: true, range: (_u, min, max) => [min - 43200, max + 43200] }, y: { range: [0, Math.ceil(Math.max(1, s.max) * 1.15)] } },
          axes: [
            { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
            { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { show: false }, size: 44, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1e6, 1e7] },
          ],
          series: [
            {},
            ...s.ys.map((_, i) => {
              const c = cssVar(s.colors[i])
              return { label: s.labels[i], stroke: c, fill: c, width: 0, paths: uPlot.paths.bars!({ size: [0.7, 24] }), points: { show: false } }
            }),
          ],
          hooks: s.onHover ? { setCursor: [(u: uPlot) => s.onHover!(u.cursor.idx ?? null)] } : {},
        },
        [s.xs, ...s.ys],
        el,
      )
      plot.over.addEventListener('mouseleave', () => s.onHover?.(null))
    }
    draw()
    const ro = new ResizeObserver(() => plot && Math.abs(plot.width - Math.max(260, el.clientWidth)) > 4 && draw())
    ro.observe(el)
    const mq = matchMedia('(prefers-color-scheme: dark)')
    const mo = new MutationObserver(draw)
    mo.observe(document.documentElement, { attributes: true, attributeFilter: ['data-theme'] })
    mq.addEventListener('change', draw)
    return () => {
      ro.disconnect()
      mo.disconnect()
      mq.removeEventListener('change', draw)
      plot?.destroy()
    }
  }, deps)
}

/** Daily counts as bars. */
export function DailyBars({ days, label }: { days: { date: string; value: number }[]; label: string }) {
  const box = useRef<HTMLDivElement>(null)
  usePlot(
    box,
    () => ({ xs: days.map((d) => dayOf(d.date)), ys: [days.map((d) => d.value)], colors: ['--accent'], labels: [label], max: Math.max(0, ...days.map((d) => d.value)) }),
    [days],
  )
  const total = days.reduce((s, d) => s + d.value, 0)
  return html`<div class="chart" ref=${box} role="img" aria-label=${`${label}: ${total} in ${days.length} days`}></div>`
}

export interface Stack {
  /** The field of each day's record. */
  key: string
  label: string
  /** A CSS variable with the colour; the legend's swatch uses the class `swatch <key>`. */
  color: string
}

/**
 * Daily counts of several kinds, stacked (the first kind at the bottom). uPlot has no stacking: each
 * series is drawn as the running total up to its kind, tallest first, so each shorter one paints over
 * the lower part of the one before. The legend under the chart gives each kind's total over the range,
 * or one day's figures while the pointer is on it; the table under it has every day.
 */
export function StackedDailyBars({ days, stacks, label }: { days: Record<string, number | string>[]; stacks: Stack[]; label: string }) {
  const box = useRef<HTMLDivElement>(null)
  const [hover, setHover] = useState<number | null>(null)
  const value = (d: Record<string, number | string>, key: string) => Number(d[key] ?? 0)
  usePlot(
    box,
    () => {
      // running[i][day]: the kinds 0..i of that day added up; the last one is the whole bar.
      const running = stacks.map((_, i) => days.map((d) => stacks.slice(0, i + 1).reduce((s, k) => s + value(d, k.key), 0)))
      const whole = running[running.length - 1] ?? []
      return {
        xs: days.map((d) => dayOf(String(d.date))),
        ys: [...running].reverse(),
        colors: stacks.map((s) => s.color).reverse(),
        labels: stacks.map((s) => s.label).reverse(),
        max: Math.max(0, ...whole),
        onHover: (i) => setHover((prev) => (prev === i ? prev : i)),
      }
    },
    [days, stacks.length],
  )
  const day = hover !== null ? days[hover] : null
  const figure = (key: string) => (day ? value(day, key) : days.reduce((s, d) => s + value(d, key), 0))
  const total = days.reduce((s, d) => s + stacks.reduce((t, k) => t + value(d, k.key), 0), 0)
  return html`<div>
    <div class="chart" ref=${box} role="img" aria-label=${`${label}: ${total} in ${days.length} days, ` + stacks.map((s) => `${s.label} ${figure(s.key)}`).join(', ')}></div>
    <p class="legend-caption muted small" aria-hidden="true">${day ? dayLabel(String(day.date)) : `Last ${days.length} days`}</p>
    <ul class="legend" aria-label=${`${label}, ${day ? dayLabel(String(day.date)) : `last ${days.length} days`}`}>
      ${stacks.map((s) => html`<li><span class=${'swatch ' + s.key} aria-hidden="true"></span>${s.label} <strong>${figure(s.key).toLocaleString()}</strong></li>`)}
    </ul>
    <details class="numbers">
      <summary>Every day as a table</summary>
      <div class="table-wrap"><table class="table small">
        <thead><tr><th>Day</th>${stacks.map((s) => html`<th class="num">${s.label}</th>`)}</tr></thead>
        <tbody>${[...days].reverse().map(
          (d) => html`<tr><th scope="row">${dayLabel(String(d.date))}</th>${stacks.map((s) => html`<td class="num">${value(d, s.key).toLocaleString()}</td>`)}</tr>`,
        )}</tbody>
      </table></div>
    </details>
  </div>`
}

/** Horizontal bars in plain HTML: readable by screen readers and needs no canvas. */
export function HBars({ rows, label }: { rows: { name: string; value: number }[]; label: string }) {
  const max = Math.max(1, ...rows.map((r) => r.value))
  return html`<table class="hbars" aria-label=${label}>
    <tbody>
      ${rows.map(
        (r) => html`<tr>
          <th scope="row">${r.name}</th>
          <td><progress max=${max} value=${r.value} aria-label=${`${r.name}: ${r.value}`}></progress></td>
          <td class="num">${r.value.toLocaleString()}</td>
        </tr>`,
      )}
    </tbody>
  </table>`
}
