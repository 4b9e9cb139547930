// CSV cells a spreadsheet would run (OWASP's CSV injection rule): a cell starting with `=`, `+`, `-`,
// `@`, tab or CR is a formula to Excel, LibreOffice and Google Sheets. An export writes such a cell
// with a single quote before it, which the spreadsheet shows as text; an import takes that quote off
// again, so an export re-imports as it was (docs/migrating.md, "Export"). A cell that already starts
// with a quote before one of those (or before another quote) gets one more, so the rule is reversible.

const FORMULA_START = new Set(['=', '+', '-', '@', '\t', '\r'])
const escaped = (cell: string) => cell.length > 1 && cell[0] === "'" && (FORMULA_START.has(cell[1]!) || cell[1] === "'")

/** A cell as an export writes it: a leading `'` when a spreadsheet would otherwise run it. */
export const spreadsheetSafe = (cell: string): string => (FORMULA_START.has(cell[0]!) || escaped(cell) ? `'${cell}` : cell)

/** A cell as an import reads it: the quote spreadsheetSafe added, taken off. */
export const spreadsheetPlain = (cell: string): string => (escaped(cell) ? cell.slice(1) : cell)
