// SQL of the chain of trust: the account's root key (table signing_keys, 005_offline.sql) and its
// signing keys (table signers, 034_signers.sql).
import type { Sql, Tx } from '../../infra/db'
import type { SigningKeyState } from './timeline'

export interface RootKeyRow {
  kid: string
  public_key_pem: string
  private_key_sealed: string
}

/** Inserts the account's root key pair unless it already has one (a concurrent first use won the race). */
export async function insertRootKey(
  sql: Sql | Tx,
  k: { accountId: string; kid: string; publicKeyPem: string; privateKeySealed: string },
): Promise<void> {
  await sql`insert into signing_keys (account_id, kid, public_key_pem, private_key_sealed)
    values (${k.accountId}, ${k.kid}, ${k.publicKeyPem}, ${k.privateKeySealed})
    on conflict (account_id) do nothing`
}

export async function findRootKey(sql: Sql | Tx, accountId: string): Promise<RootKeyRow | null> {
  const [row] = await sql<RootKeyRow[]>`select kid, public_key_pem, private_key_sealed from signing_keys
    where account_id = ${accountId}`
  return row ?? null
}

/** Serialises every change of an account's signing keys (create, activate, revoke, the sweeper) on its root row. */
export async function lockAccountKeys(tx: Tx, accountId: string, skipLocked = false): Promise<boolean> {
  const rows = skipLocked
    ? await tx`select 1 from signing_keys where account_id = ${accountId} for update skip locked`
    : await tx`select 1 from signing_keys where account_id = ${accountId} for update`
  return rows.length > 0
}

export interface SignerRow {
  kid: string
  account_id: string
  public_key_pem: string
  private_key_sealed: string
  state: SigningKeyState
  certificate: string
  created_at: Date
  activate_at: Date | null
  activated_at: Date | null
  revoked_at: Date | null
  revoke_reason: string | null
}

/** Every signing key of the account (revoked ones included), newest first. */
export async function listSigners(sql: Sql | Tx, accountId: string): Promise<SignerRow[]> {
  return sql<SignerRow[]>`select * from signers where account_id = ${accountId} order by created_at desc, kid`
}

export async function findSigner(tx: Tx, accountId: string, kid: string): Promise<SignerRow | null> {
  const [row] = await tx<SignerRow[]>`select * from signers where account_id = ${accountId} and kid = ${kid}`
  return row ?? null
}

export async function countUnrevoked(tx: Tx, accountId: string): Promise<number> {
  const [row] = await tx<{ n: number }[]>`select count(*)::int as n from signers where account_id = ${accountId} and state <> 'revoked'`
  return row!.n
}

export async function insertSigner(
  tx: Tx,
  k: { kid: string; accountId: string; publicKeyPem: string; privateKeySealed: string; certificate: string; createdAt: Date; activateAt: Date | null },
): Promise<SignerRow> {
  const [row] = await tx<SignerRow[]>`insert into signers (kid, account_id, public_key_pem, private_key_sealed, certificate, created_at, activate_at)
    values (${k.kid}, ${k.accountId}, ${k.publicKeyPem}, ${k.privateKeySealed}, ${k.certificate}, ${k.createdAt}, ${k.activateAt})
    returning *`
  return row!
}

/** `kid` becomes the active key from `at`; the key active before it is retired. */
export async function activateSigner(tx: Tx, accountId: string, kid: string, at: Date): Promise<SignerRow> {
  await tx`update signers set state = 'retired' where account_id = ${accountId} and state = 'active' and kid <> ${kid}`
  const [row] = await tx<SignerRow[]>`update signers set state = 'active', activated_at = ${at}
    where account_id = ${accountId} and kid = ${kid} returning *`
  return row!
}

export async function revokeSigner(tx: Tx, accountId: string, kid: string, reason: string | null): Promise<SignerRow> {
  const [row] = await tx<SignerRow[]>`update signers set state = 'revoked', revoked_at = now(), revoke_reason = ${reason}
    where account_id = ${accountId} and kid = ${kid} returning *`
  return row!
}

/** Scheduled keys of the account whose time has come (the database's clock), oldest schedule first. */
export async function dueSigners(tx: Tx, accountId: string): Promise<SignerRow[]> {
  return tx<SignerRow[]>`select * from signers where account_id = ${accountId} and state = 'pending'
    and activate_at <= now() order by activate_at, kid`
}

/** Accounts with a scheduled activation due (for the sweeper). */
export async function accountsWithDueSigners(sql: Sql, limit: number): Promise<string[]> {
  const rows = await sql<{ account_id: string }[]>`select distinct account_id from signers
    where state = 'pending' and activate_at <= now() limit ${limit}`
  return rows.map((r) => r.account_id)
}
