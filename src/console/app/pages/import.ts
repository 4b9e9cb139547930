// Import keys from another system: choose a file, see what a dry run says (counts, or every bad row
// by line and field), then import. The file goes to the node as it is (CSV, NDJSON or JSON, by its
// extension); the checks are the API's, so the preview is exactly what the import will do.
import { useState } from 'preact/hooks'
import { apiPath, postText, withQuery, type Problem } from '../api'
import { asProblem, html, num, PageHead } from '../ui'
import type { DryRunAnswer, ImportAnswer } from '../../../modules/keys/import-model'

const TYPES: Record<string, string> = { csv: 'text/csv', ndjson: 'application/x-ndjson', jsonl: 'application/x-ndjson', json: 'application/json' }
/** The API's own limit, checked here too so an oversized file is refused before it is uploaded. */
const MAX_BYTES = 8 * 1024 * 1024

type Step =
  | { kind: 'idle' }
  | { kind: 'busy'; what: string }
  | { kind: 'checked'; answer: DryRunAnswer }
  | { kind: 'refused'; problem: Problem }
  | { kind: 'done'; answer: ImportAnswer }

export function ImportKeys() {
  const [file, setFile] = useState<{ name: string; text: string; type: string } | null>(null)
  const [step, setStep] = useState<Step>({ kind: 'idle' })

  const choose = async (e: Event) => {
    const f = (e.target as HTMLInputElement).files?.[0]
    setFile(null)
    if (!f) return setStep({ kind: 'idle' })
    const type = TYPES[f.name.split('.').pop()!.toLowerCase()]
    if (!type) return setStep({ kind: 'refused', problem: { status: 400, code: 'invalid_request', detail: 'Choose a .csv, .ndjson, .jsonl or .json file.' } })
    if (f.size > MAX_BYTES) {
      return setStep({ kind: 'refused', problem: { status: 413, code: 'payload_too_large', detail: 'The file is over 8 MiB: split it into files of at most 10,000 rows.' } })
    }
    const next = { name: f.name, text: await f.text(), type }
    setFile(next)
    await run(next, true)
  }

  const run = async (f: { text: string; type: string }, dryRun: boolean) => {
    setStep({ kind: 'busy', what: dryRun ? 'Checking every row…' : 'Importing…' })
    try {
      const path = withQuery(apiPath`/v1/keys/import`, { dry_run: dryRun ? 'true' : undefined })
      const answer = await postText<DryRunAnswer | ImportAnswer>(path, f.text, f.type)
      setStep('dry_run' in answer ? { kind: 'checked', answer } : { kind: 'done', answer })
    } catch (err) {
      setStep({ kind: 'refused', problem: asProblem(err) })
    }
  }

  return html`<${PageHead} title="Import keys">
      <a class="btn" href="#/keys">Back to the keys</a>
    </${PageHead}>
    <div class="panel">
      <p>Bring keys from another system (Keygen, Lemon Squeezy, Unkey, a spreadsheet): each keeps the value your customers already have.
        A CSV needs a header row with the import's column names; NDJSON has one row per line. At most 10,000 rows a file.
        The file is checked first; nothing is written until you import, and then every row is imported or none.</p>
      <div class="field">
        <label for="import-file">File</label>
        <input id="import-file" type="file" accept=".csv,.ndjson,.jsonl,.json" onChange=${choose} />
      </div>
    </div>
    ${step.kind === 'busy' ? html`<div class="panel" aria-live="polite"><p>${step.what}</p></div>` : null}
    ${step.kind === 'checked' && file
      ? html`<div class="panel" aria-live="polite">
          <h2>Ready to import</h2>
          <p><strong>${num(step.answer.would_create)}</strong> ${step.answer.would_create === 1 ? 'key' : 'keys'} will be created from ${file.name};${' '}<strong>${num(step.answer.would_skip)}</strong> ${step.answer.would_skip === 1 ? 'row is' : 'rows are'} skipped (their external_id is already imported).</p>
          <div class="form-actions">
            <button class="btn primary" type="button" disabled=${step.answer.would_create === 0} onClick=${() => run(file, false)}>
              Import ${num(step.answer.would_create)} ${step.answer.would_create === 1 ? 'key' : 'keys'}
            </button>
          </div>
        </div>`
      : null}
    ${step.kind === 'done'
      ? html`<div class="panel" aria-live="polite">
          <h2>Imported</h2>
          <p><strong>${num(step.answer.created)}</strong> created, <strong>${num(step.answer.skipped)}</strong> skipped.</p>
          <div class="form-actions"><a class="btn primary" href="#/keys">Open the keys</a></div>
        </div>`
      : null}
    ${step.kind === 'refused' ? html`<${Refusal} problem=${step.problem} />` : null}`
}

/** Every bad row by line and field (422), or the file's own problem (a wrong column, too big). */
function Refusal({ problem }: { problem: Problem }) {
  const rows = problem.rows ?? []
  const fileErrors = rows.length === 0 ? (problem.errors ?? []) : []
  return html`<div class="panel" role="alert">
    <h2>${rows.length ? `${num(rows.length)} ${rows.length === 1 ? 'row needs' : 'rows need'} fixing` : 'The file cannot be imported'}</h2>
    <p>${problem.detail}</p>
    ${fileErrors.length ? html`<ul>${fileErrors.map((e) => html`<li><span class="mono">${e.field}</span> ${e.message}</li>`)}</ul>` : null}
    ${rows.length
      ? html`<div class="table-wrap"><table class="table">
          <thead><tr><th class="num">Line</th><th>External id</th><th>Field</th><th>Problem</th></tr></thead>
          <tbody>${rows.flatMap((r) =>
            r.errors.map((e, i) => html`<tr>
              <td class="num">${i === 0 ? r.line : ''}</td>
              <td class="mono small">${i === 0 ? (r.external_id ?? '—') : ''}</td>
              <td class="mono small">${e.field}</td>
              <td>${e.message}</td>
            </tr>`),
          )}</tbody>
        </table></div>`
      : null}
  </div>`
}
