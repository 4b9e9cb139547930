// Where the client keeps what must survive a restart: the last verified valid answer (for grace), the
// latest clock value it has seen (to notice a clock set back), the browser's random device id, and the
// account's key set (signing-keys.ts).
// Values are strings; a storage may be synchronous or not.

export interface KeywardStorage {
  get(name: string): Promise<string | null> | string | null
  set(name: string, value: string): Promise<void> | void
  remove(name: string): Promise<void> | void
}

/** Lives as long as the process (the default outside browsers). */
export function memoryStorage(): KeywardStorage {
  const values = new Map<string, string>()
  return {
    get: (name) => values.get(name) ?? null,
    set: (name, value) => void values.set(name, value),
    remove: (name) => void values.delete(name),
  }
}

/** The browser's localStorage (the default where it exists), names prefixed so apps can share it. */
export function localStorageStorage(prefix = 'keyward:'): KeywardStorage {
  const ls = (globalThis as { localStorage?: Storage }).localStorage
  if (!ls) throw new Error('localStorage is not available here')
  return {
    get: (name) => ls.getItem(prefix + name),
    set: (name, value) => ls.setItem(prefix + name, value),
    remove: (name) => ls.removeItem(prefix + name),
  }
}

interface NodeFs {
  readFile(path: string, encoding: 'utf8'): Promise<string>
  writeFile(path: string, data: string, options: { mode: number }): Promise<void>
  rename(from: string, to: string): Promise<void>
  mkdir(path: string, options: { recursive: boolean; mode: number }): Promise<unknown>
}

/** Imports a Node built-in without letting browser bundlers try to resolve it. */
export async function nodeModule<T>(name: string): Promise<T> {
  const specifier = `node:${name}`
  return (await import(/* @vite-ignore */ /* webpackIgnore: true */ specifier)) as T
}

/**
 * One JSON file (Node, Bun, Deno, Electron's main process). Writes go to a temporary file renamed over
 * the old one, so a crash never leaves half a file; the file is private to the user (mode 0600).
 */
export function fileStorage(path: string): KeywardStorage {
  let cache: Record<string, string> | null = null
  let queue: Promise<unknown> = Promise.resolve()
  const fs = () => nodeModule<NodeFs>('fs/promises')
  async function load(): Promise<Record<string, string>> {
    if (cache) return cache
    try {
      const parsed = JSON.parse(await (await fs()).readFile(path, 'utf8'))
      cache = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : {}
    } catch {
      cache = {}
    }
    return cache!
  }
  async function save(values: Record<string, string>) {
    const f = await fs()
    const dir = path.replace(/[\\/][^\\/]*$/, '')
    if (dir && dir !== path) await f.mkdir(dir, { recursive: true, mode: 0o700 })
    const tmp = `${path}.${Math.random().toString(36).slice(2)}.tmp`
    await f.writeFile(tmp, JSON.stringify(values), { mode: 0o600 })
    await f.rename(tmp, path)
  }
  // Writes are serialised so two quick updates cannot finish in the wrong order.
  const update = (change: (values: Record<string, string>) => void) =>
    (queue = queue.catch(() => {}).then(async () => {
      const values = await load()
      change(values)
      await save(values)
    }))
  return {
    get: async (name) => (await load())[name] ?? null,
    set: (name, value) => update((v) => void (v[name] = value)) as Promise<void>,
    remove: (name) => update((v) => void delete v[name]) as Promise<void>,
  }
}

/** localStorage in a browser, memory elsewhere (pass `fileStorage(path)` to keep grace across restarts). */
export function defaultStorage(): KeywardStorage {
  try {
    if ((globalThis as { localStorage?: Storage }).localStorage) return localStorageStorage()
  } catch {
    // localStorage can throw (disabled cookies, opaque origins): fall back to memory.
  }
  return memoryStorage()
}
