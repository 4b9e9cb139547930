// With no server running, the CLI creates a product and imports a file of keys into it (the import
// failed before: an installation with no server had no way to create the product the rows name).
// Then a server on the same store validates the imported keys. Bad arguments name the option.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { useCli } from '../support/cli'
import { client } from '../support/harness'

setDefaultTimeout(180_000)
const { keyward, startNode } = useCli('keyward-products-cli-')

test('products create, then import a CSV naming it by slug, all without a server; a server then validates the keys', async () => {
  const created = await keyward('accounts', 'create', '--name', 'Offline Setup', '--plan', 'growth')
  expect(created.code).toBe(0)
  const accountId = /account_id: (acct_\S+)/.exec(created.stdout)![1]!
  const token = /token: (kw_\S+)/.exec(created.stdout)![1]!

  // The import first fails: its product does not exist yet.
  const dir = mkdtempSync(join(tmpdir(), 'keyward-import-'))
  try {
    const file = join(dir, 'keys.csv')
    writeFileSync(file, 'key,product_slug,plan,activation_limit\nLEGACY-KEY-0001,desk-app,pro,2\nLEGACY-KEY-0002,desk-app,basic,1\n')
    const early = await keyward('import', file, '--account', accountId)
    expect(early.code).toBe(2)
    expect(early.stderr).toContain('product_slug names no product of this account')

    const product = await keyward('products', 'create', '--account', accountId, '--name', 'Desk App', '--slug', 'desk-app', '--description', 'the desktop build')
    if (product.code !== 0) throw new Error(`exit ${product.code}: ${product.stdout}${product.stderr}`)
    const productId = /product_id: (prod_[0-9A-HJKMNP-TV-Z]{26})/.exec(product.stdout)![1]!
    expect(product.stdout).toContain('slug: desk-app')
    const listed = await keyward('products', 'list', '--account', accountId)
    expect(listed.stdout).toContain(`${productId}\tdesk-app\t0\tDesk App`)

    const imported = await keyward('import', file, '--account', accountId)
    if (imported.code !== 0) throw new Error(`exit ${imported.code}: ${imported.stdout}${imported.stderr}`)
    expect(imported.stdout).toContain('created: 2')

    const node = await startNode()
    try {
      const call = client(node.url)
      const res = await call('POST', '/v1/validate', { token, body: { key: 'LEGACY-KEY-0001', device_fingerprint: 'cd'.repeat(32) } })
      expect(res.body).toMatchObject({ valid: true, plan: 'pro', activation_limit: 2 })
      // The product is the account's, made by the operator (its event says so).
      const events = (await call('GET', `/v1/events?type=product.created&resource_id=${productId}`, { token })).body
      expect(events.data.map((e: any) => e.actor.type)).toEqual(['operator'])
    } finally {
      await node.stop()
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('products create refuses bad arguments, naming the option; a taken slug says so', async () => {
  const accountId = /account_id: (acct_\S+)/.exec((await keyward('accounts', 'create', '--name', 'Slugs', '--plan', 'growth')).stdout)![1]!
  const badSlug = await keyward('products', 'create', '--account', accountId, '--name', 'X', '--slug', 'Not A Slug')
  expect(badSlug).toMatchObject({ code: 2, stderr: expect.stringContaining('--slug') })
  const noName = await keyward('products', 'create', '--account', accountId, '--slug', 'x')
  expect(noName).toMatchObject({ code: 2, stderr: expect.stringContaining('--name') })
  const noAccount = await keyward('products', 'create', '--name', 'X', '--slug', 'x')
  expect(noAccount).toMatchObject({ code: 2, stderr: expect.stringContaining('--account') })
  const unknown = await keyward('products', 'create', '--account', 'acct_01JD7Z3X9K8Q4W2E6R5T1Y0V3J', '--name', 'X', '--slug', 'x')
  expect(unknown).toMatchObject({ code: 2, stderr: expect.stringContaining('no account') })
  expect((await keyward('products', 'create', '--account', accountId, '--name', 'X', '--slug', 'x')).code).toBe(0)
  const taken = await keyward('products', 'create', '--account', accountId, '--name', 'Y', '--slug', 'x')
  expect(taken).toMatchObject({ code: 2, stderr: expect.stringContaining('already used') })
})
