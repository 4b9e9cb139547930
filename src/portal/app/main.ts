// The end-user page for air-gapped activation (docs/api.md, "The end-user page"): paste or scan a
// request code → the response code (copy, QR); paste a deactivation code → the receipt. It calls only
// this origin's two portal routes; the QR codes are drawn here (qrcode-generator, bundled), so nothing
// is loaded from anywhere else. A request code may also arrive in the address's fragment
// (`#request=KWREQ1.…`), which browsers never send to a server.
import qrcode from 'qrcode-generator'

const productId = location.pathname.split('/')[2] ?? ''
const base = `/portal/${encodeURIComponent(productId)}/offline`

const $ = <T extends HTMLElement>(sel: string) => document.querySelector(sel) as T

interface Problem {
  detail?: string
  code?: string
  retry_after?: number
}

/** Friendly words for the answers a customer can meet; the server's detail otherwise. */
const REASONS: Record<string, string> = {
  not_found: 'This license key is not known for this product. Check that the request was made by the right app.',
  revoked: 'This license key has been revoked. Contact the vendor.',
  suspended: 'This license key is suspended. Contact the vendor.',
  expired: 'This license key has expired.',
  device_mismatch: 'This computer does not match the one the license is bound to.',
  device_already_used: 'This computer already uses another license key of this product.',
  activation_limit: 'Every seat of this license key is taken. Deactivate another computer first.',
  request_used: 'This request code was already used for a seat that has since been released. Make a new request in the app.',
  invalid_deactivation: 'This is not a valid deactivation code of an active computer. Check that it was copied whole.',
  deactivation_limit: 'This license key allows no more deactivations. Contact the vendor.',
  rate_limited: 'Too many attempts. Please wait a moment and try again.',
}

async function post(path: string, body: object): Promise<{ status: number; json: Record<string, unknown> & Problem }> {
  const res = await fetch(`${base}/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    credentials: 'omit',
  })
  let json: Record<string, unknown> = {}
  try {
    json = (await res.json()) as Record<string, unknown>
  } catch {
    /* an answer that is not JSON: reported by status below */
  }
  return { status: res.status, json }
}

function el(tag: string, props: Record<string, unknown> = {}, ...children: (Node | string)[]): HTMLElement {
  const node = Object.assign(document.createElement(tag), props)
  node.append(...children)
  return node
}

const SVG = 'http://www.w3.org/2000/svg'

/** The text as a QR code (SVG, one path), or null when it is too long for one. */
function qr(text: string): SVGSVGElement | null {
  let code: ReturnType<typeof qrcode>
  try {
    code = qrcode(0, 'L')
    code.addData(text, 'Byte')
    code.make()
  } catch {
    return null
  }
  const n = code.getModuleCount()
  const quiet = 4
  let d = ''
  for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) if (code.isDark(r, c)) d += `M${c + quiet} ${r + quiet}h1v1h-1z`
  const svg = document.createElementNS(SVG, 'svg')
  svg.setAttribute('viewBox', `0 0 ${n + 2 * quiet} ${n + 2 * quiet}`)
  svg.setAttribute('role', 'img')
  svg.setAttribute('aria-label', 'QR code of the text above')
  svg.setAttribute('shape-rendering', 'crispEdges')
  const bg = document.createElementNS(SVG, 'rect')
  bg.setAttribute('width', '100%')
  bg.setAttribute('height', '100%')
  bg.setAttribute('fill', '#fff')
  const path = document.createElementNS(SVG, 'path')
  path.setAttribute('d', d)
  path.setAttribute('fill', '#000')
  svg.append(bg, path)
  return svg
}

/** A result: its label, the text (read-only, selectable), a copy button and its QR code. */
function result(box: HTMLElement, label: string, text: string, note: string) {
  const area = el('textarea', { readOnly: true, rows: 6, value: text, spellcheck: false, className: 'code' }) as HTMLTextAreaElement
  area.setAttribute('aria-label', label)
  area.dataset.result = ''
  const copy = el('button', { type: 'button', className: 'primary', textContent: 'Copy' }) as HTMLButtonElement
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text)
      copy.textContent = 'Copied'
    } catch {
      area.select() // no clipboard access: selected for the user to copy
      copy.textContent = 'Selected: copy it'
    }
    setTimeout(() => (copy.textContent = 'Copy'), 2000)
  })
  const code = qr(text)
  const figure = code ? el('figure', { className: 'qr' }, code) : el('p', { className: 'muted', textContent: 'Too long for a QR code: copy the text.' })
  box.replaceChildren(el('div', { className: 'ok' }, el('h3', { textContent: label }), el('p', { textContent: note }), area, el('div', { className: 'row' }, copy), figure))
}

function problem(box: HTMLElement, message: string) {
  box.replaceChildren(el('div', { className: 'error', role: 'alert' }, el('strong', { textContent: 'Not done. ' }), message))
}

function explain(status: number, json: Problem & Record<string, unknown>): string {
  const code = (json.reason as string | undefined) ?? json.code
  if (status === 404) return 'This page is not available, or the license key is not known for this product.'
  if (code && REASONS[code]) return REASONS[code]
  return json.detail ?? `The server answered ${status}. Please try again.`
}

function busy(form: HTMLFormElement, on: boolean) {
  for (const b of form.querySelectorAll('button')) b.disabled = on
  form.setAttribute('aria-busy', String(on))
}

const activateForm = $<HTMLFormElement>('#activate')
const requestBox = $<HTMLTextAreaElement>('#request')
const activateAnswer = $<HTMLElement>('#activate-answer')
activateForm.addEventListener('submit', async (e) => {
  e.preventDefault()
  const request = requestBox.value.replace(/\s+/g, '')
  if (!request.startsWith('KWREQ1.')) return problem(activateAnswer, 'A request code starts with KWREQ1. Copy the whole code from the app.')
  busy(activateForm, true)
  try {
    const { status, json } = await post('activations', { request })
    if ((status === 200 || status === 201) && typeof json.response === 'string') {
      result(activateAnswer, 'Response code', json.response, 'Type, paste or scan this code into the app on the offline computer.')
    } else problem(activateAnswer, explain(status, json))
  } catch {
    problem(activateAnswer, 'The server could not be reached. Check this device\'s connection and try again.')
  } finally {
    busy(activateForm, false)
  }
})

const deactivateForm = $<HTMLFormElement>('#deactivate')
const codeBox = $<HTMLTextAreaElement>('#code')
const deactivateAnswer = $<HTMLElement>('#deactivate-answer')
deactivateForm.addEventListener('submit', async (e) => {
  e.preventDefault()
  const code = codeBox.value.replace(/\s+/g, '')
  if (!code.startsWith('KWDEA1.')) return problem(deactivateAnswer, 'A deactivation code starts with KWDEA1. Copy the whole code from the app.')
  busy(deactivateForm, true)
  try {
    const { status, json } = await post('deactivations', { code })
    if (status === 200 && json.released === true && typeof json.receipt === 'string') {
      result(deactivateAnswer, 'Receipt', json.receipt, 'The seat is free. Keep this receipt: it proves the release.')
    } else if (status === 200 && json.released === false) {
      problem(deactivateAnswer, 'This computer\'s seat was already released.')
    } else problem(deactivateAnswer, explain(status, json))
  } catch {
    problem(deactivateAnswer, 'The server could not be reached. Check this device\'s connection and try again.')
  } finally {
    busy(deactivateForm, false)
  }
})

// A request code in the fragment fills the box (a QR code the app shows may carry the page's address).
const fromFragment = new URLSearchParams(location.hash.slice(1)).get('request')
if (fromFragment) {
  requestBox.value = fromFragment
  history.replaceState(null, '', location.pathname) // the code does not stay in the address bar or history
}

// Scanning with the camera where the browser can read QR codes itself (BarcodeDetector); elsewhere the
// phone's camera app reads the code and the text is pasted.
interface Detector {
  detect(source: CanvasImageSource): Promise<{ rawValue: string }[]>
}
const DetectorClass = (globalThis as { BarcodeDetector?: new (o: { formats: string[] }) => Detector }).BarcodeDetector
if (DetectorClass && navigator.mediaDevices?.getUserMedia) {
  const dialog = $<HTMLDialogElement>('#scanner')
  const video = $<HTMLVideoElement>('#camera')
  let stream: MediaStream | null = null
  const stop = () => {
    stream?.getTracks().forEach((t) => t.stop())
    stream = null
    if (dialog.open) dialog.close()
  }
  $<HTMLButtonElement>('#scan-cancel').addEventListener('click', stop)
  for (const button of document.querySelectorAll<HTMLButtonElement>('[data-scan]')) {
    button.hidden = false
    button.addEventListener('click', async () => {
      const target = $<HTMLTextAreaElement>(`#${button.dataset.scan}`)
      try {
        stream = await navigator.mediaDevices.getUserMedia({ video: { facingMode: 'environment' } })
      } catch {
        return problem(target.form!.nextElementSibling as HTMLElement, 'The camera is not available. Paste the code instead.')
      }
      video.srcObject = stream
      dialog.showModal()
      await video.play()
      const detector = new DetectorClass({ formats: ['qr_code'] })
      const tick = async () => {
        if (!stream) return
        const found = await detector.detect(video).catch(() => [])
        if (found[0]) {
          target.value = found[0].rawValue
          stop()
          target.form!.requestSubmit()
        } else requestAnimationFrame(tick)
      }
      requestAnimationFrame(tick)
    })
  }
}
