// Repeated strings (account ids, product ids, plans, policy ids) held once and named by a small integer,
// so a table of a million rows stores 4 bytes per field instead of a reference to its own copy.
// Counted: an id whose last user releases it is freed and reused, so the table holds only the strings
// still in use (a node that sees products come and go does not grow forever).
export class StringIds {
  private ids = new Map<string, number>()
  private strings: (string | undefined)[] = []
  private users: number[] = []
  private free: number[] = []

  /** The id of `s`, counted as one more user. */
  take(s: string): number {
    let id = this.ids.get(s)
    if (id === undefined) {
      id = this.free.pop() ?? this.strings.length
      this.strings[id] = s
      this.users[id] = 0
      this.ids.set(s, id)
    }
    this.users[id]++
    return id
  }

  /** The string named `id` (which must be in use). */
  get(id: number): string {
    return this.strings[id]!
  }

  /** One user fewer; the last one frees the id. */
  release(id: number) {
    if (--this.users[id] > 0) return
    this.ids.delete(this.strings[id]!)
    this.strings[id] = undefined
    this.free.push(id)
  }

  get size() {
    return this.ids.size
  }

  clear() {
    this.ids.clear()
    this.strings = []
    this.users = []
    this.free = []
  }
}
