// Raw HTTP/1.x over a TCP socket, for requests `fetch` cannot send: a Host header that is short, empty,
// odd or missing, a request target in absolute form, HTTP/1.0.
import net from 'node:net'

export interface RawReply {
  status: number
  headers: Record<string, string>
  body: any
  text: string
}

/** Sends `head` (request line and headers, without the blank line) and `body`, reads the reply until close. */
export function rawRequest(port: number, head: string[], body = ''): Promise<RawReply> {
  const bytes = Buffer.from(body)
  const lines = [...head]
  if (body !== '' && !lines.some((l) => /^(content-length|transfer-encoding):/i.test(l))) lines.push(`Content-Length: ${bytes.byteLength}`)
  if (!lines.some((l) => /^connection:/i.test(l))) lines.push('Connection: close')
  const wire = Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), bytes])
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    const socket = net.connect(port, '127.0.0.1', () => socket.write(wire))
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no complete reply to ${head[0]}`)))
    socket.on('data', (d: Buffer) => chunks.push(d))
    socket.on('error', reject)
    socket.on('close', () => {
      try {
        resolve(parseReply(Buffer.concat(chunks)))
      } catch (err) {
        reject(err)
      }
    })
  })
}

function parseReply(raw: Buffer): RawReply {
  const end = raw.indexOf('\r\n\r\n')
  if (end === -1) throw new Error(`incomplete reply: ${JSON.stringify(raw.toString('latin1'))}`)
  const [statusLine, ...headerLines] = raw.subarray(0, end).toString('latin1').split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of headerLines) {
    const i = line.indexOf(':')
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
  }
  let payload = raw.subarray(end + 4)
  if (headers['transfer-encoding']?.toLowerCase() === 'chunked') payload = dechunk(payload)
  const text = payload.toString('utf8')
  let body: unknown = text
  try {
    body = text ? JSON.parse(text) : null
  } catch {}
  return { status: Number(statusLine.split(' ')[1]), headers, body, text }
}

function dechunk(buf: Buffer): Buffer {
  const out: Buffer[] = []
  let at = 0
  for (;;) {
    const eol = buf.indexOf('\r\n', at)
    const size = parseInt(buf.subarray(at, eol).toString('latin1'), 16)
    if (!size) return Buffer.concat(out)
    out.push(buf.subarray(eol + 2, eol + 2 + size))
    at = eol + 2 + size + 2
  }
}
