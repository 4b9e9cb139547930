// What a Db's transactions run once they have ended (src/infra/db.ts afterCommit): the commit's hooks
// after COMMIT, the rollback's when the transaction fails, nothing for a savepoint's scope or another Sql.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import postgres from 'postgres'
import { afterCommit, poolOf, type Db } from '../../src/infra/db'
import { freshDatabase, type TestDb } from '../support/harness'

let tdb: TestDb
let db: Db
beforeAll(async () => {
  tdb = await freshDatabase()
  db = await tdb.open()
  await db.sql`create table t (n int primary key)`
}, 60_000)
afterAll(async () => {
  if (tdb?.url) await db?.close() // embedded: drop closes it
  await tdb?.drop()
})

test('after COMMIT the commit hooks run, in order, before begin returns; the row is there for anyone', async () => {
  const seen: string[] = []
  const result = await db.sql.begin(async (tx) => {
    expect(poolOf(tx)).toBe(db.sql)
    await tx`insert into t values (1)`
    expect(afterCommit(tx, () => seen.push('first'), () => seen.push('rolled back'))).toBe(true)
    expect(afterCommit(tx, () => seen.push('second'), () => seen.push('rolled back'))).toBe(true)
    expect(seen).toEqual([]) // not before the end
    return 'done'
  })
  expect(result).toBe('done')
  expect(seen).toEqual(['first', 'second'])
  expect(await db.sql`select n from t where n = 1`).toHaveLength(1)
})

test('a transaction that fails runs the rollback hooks, not the commit ones, and its error still reaches the caller', async () => {
  const seen: string[] = []
  const failing = db.sql.begin(async (tx) => {
    await tx`insert into t values (2)`
    afterCommit(tx, () => seen.push('committed'), () => seen.push('rolled back'))
    throw new Error('changed my mind')
  })
  await expect(failing).rejects.toThrow('changed my mind')
  expect(seen).toEqual(['rolled back'])
  expect(await db.sql`select n from t where n = 2`).toHaveLength(0)

  // a statement that fails (caught by the callback): postgres.js rolls back, and so do the hooks
  const seen2: string[] = []
  const caught = db.sql.begin(async (tx) => {
    afterCommit(tx, () => seen2.push('committed'), () => seen2.push('rolled back'))
    await tx`insert into t values (1)`.catch(() => 'duplicate, ignored')
  })
  await expect(caught).rejects.toThrow()
  expect(seen2).toEqual(['rolled back'])
})

test('a hook that throws changes nothing for the transaction or the hooks after it', async () => {
  const seen: string[] = []
  await db.sql.begin(async (tx) => {
    await tx`insert into t values (3)`
    afterCommit(tx, () => { throw new Error('hook bug') }, () => {})
    afterCommit(tx, () => seen.push('after'), () => {})
  })
  expect(seen).toEqual(['after'])
  expect(await db.sql`select n from t where n = 3`).toHaveLength(1)
})

test('a savepoint scope and a transaction of another Sql are not tracked: nothing registered', async () => {
  await db.sql.begin(async (tx) => {
    await tx.savepoint(async (sp) => {
      expect(poolOf(sp)).toBeUndefined()
      expect(afterCommit(sp, () => {}, () => {})).toBe(false)
    })
  })
  if (!tdb.url) return // embedded: one session, no second Sql
  const other = postgres(tdb.url, { max: 1, onnotice: () => {} })
  try {
    await other.begin(async (tx) => {
      expect(poolOf(tx)).toBeUndefined()
      expect(afterCommit(tx, () => {}, () => {})).toBe(false)
    })
  } finally {
    await other.end()
  }
})
