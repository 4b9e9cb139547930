// Charts: uPlot (one small, fast canvas library; no inline styles from the network, no fonts).
import uPlot from 'uplot'
import { useEffect, useRef } from 'preact/hooks'
import { html } from './ui'

function cssVar(name: string) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888'
}

/** Daily counts as bars; redraws on data, width and colour-scheme changes. */
export function DailyBars({ days, label }: { days: { date: string; value: number }[]; label: string }) {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const el = box.current
    if (!el) return
    let plot: uPlot | null = null
    const draw = () => {
      plot?.destroy()
      const ink = cssVar('--muted')
      const grid = cssVar('--line')
      const accent = cssVar('--accent')
      const xs = days.map((d) => Date.parse(d.date + 'T00:00:00Z') / 1000)
      const ys = days.map((d) => d.value)
      const max = Math.max(1, ...ys)
      plot = new uPlot(
        {
          width: Math.max(280, el.clientWidth),
          height: 220,
          legend: { show: false },
          cursor: { y: false, points: { show: false } },
          scales: { x: { time: true }, y: { range: [0, Math.ceil(max * 1.15)] } },
          axes: [
            { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
            { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { show: false }, size: 40, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000] },
          ],
          series: [{}, { label, stroke: accent, fill: accent, width: 0, paths: uPlot.paths.bars!({ size: [0.7, 24] }), points: { show: false } }],
        },
        [xs, ys],
        el,
      )
    }
    draw()
    const ro = new ResizeObserver(() => plot && Math.abs(plot.width - el.clientWidth) > 4 && draw())
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
  }, [days])
  const total = days.reduce((s, d) => s + d.value, 0)
  return html`<div class="chart" ref=${box} role="img" aria-label=${`${label}: ${total} in ${days.length} days`}></div>`
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
