// Polling for a condition that another process, node or timer makes true (never a fixed sleep).

/** Resolves once `cond` holds (checked every 50 ms); throws after `ms`, naming `what`. */
export async function waitUntil(cond: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(50)
  }
}
