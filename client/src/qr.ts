// QR codes for the air-gapped exchange's codes (docs/integrating.md, "Customers without a network"):
// a separate entry point, `@keyward/client/qr`, so the SDK itself keeps no runtime dependency. It draws
// with `qrcode-generator` (an optional peer dependency, installed by the apps that import this file);
// the QR encoding is that package's, nothing here encodes.
import qrcode from 'qrcode-generator'

export interface QrOptions {
  /** Light modules around the code (the quiet zone); default 4 for SVG, 2 for text. */
  margin?: number
}

function encode(code: string) {
  if (typeof code !== 'string' || code.length === 0) throw new TypeError('Keyward: a QR code needs the code text')
  // Error correction L: a 2,048-character request code fits (version 33); the codes are copied from a
  // screen, where damage is rare and a smaller code scans more easily.
  const qr = qrcode(0, 'L')
  qr.addData(code, 'Byte')
  qr.make()
  return qr
}

/**
 * The code as text for a terminal: two rows of modules per line in Unicode half blocks, light modules
 * drawn (a dark terminal shows dark modules as its background; phone scanners read it either way).
 */
export function qrText(code: string, options: QrOptions = {}): string {
  return encode(code).createASCII(1, options.margin ?? 2)
}

/** The code as a standalone, scalable SVG element (black on white), for a page or a file. */
export function qrSvg(code: string, options: QrOptions = {}): string {
  return encode(code).createSvgTag({ cellSize: 1, margin: options.margin ?? 4, scalable: true })
}

/** The number of modules on a side (without the margin): 33 … 149 for the codes of this exchange. */
export function qrSize(code: string): number {
  return encode(code).getModuleCount()
}
