// Polling for a condition that another process, node or timer makes true (never a fixed sleep): the one
// polling loop of the tests and benchmarks, in three forms.

/** Reads `what` every 50 ms until `ok` holds of it or `ms` passed; returns the last value read (the caller asserts). */
export async function until<T>(what: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await what()
    if (ok(v) || Date.now() > deadline) return v
    await Bun.sleep(50)
  }
}

/** Resolves once `cond` holds (checked every 50 ms); throws after `ms`, naming `what`. */
export async function waitUntil(cond: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  if (!(await until(async () => await cond(), Boolean, ms))) throw new Error(`timed out waiting for ${what}`)
}

/** Resolves once `url` answers 2xx (a server that came up); throws after `ms`. */
export async function waitForUrl(url: string, ms = 60_000): Promise<void> {
  const up = () => fetch(url).then((res) => res.ok, () => false)
  await waitUntil(up, ms, `${url} to come up`)
}
