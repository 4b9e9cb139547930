-- Signing keys that can change (docs/integrating.md, "Keys you can rotate"). The account's key of
-- 005_offline.sql (`signing_keys`, one per account) is its ROOT: it keeps its kid, the apps pin it, and
-- it now signs certificates for the keys below, which sign answers and licenses and can be rotated
-- and revoked.
--
-- One row per signing key. The private half is sealed with SECRET_KEY exactly as the root's is
-- (AES-256-GCM, infra/crypto.ts) and never leaves the server. `state` is what was written; a pending
-- key whose activate_at has come is already active on every node (each computes it on its own clock,
-- modules/signing/timeline.ts), and the activation sweeper writes it down once.
create table signers (
  kid                 text primary key,
  account_id          text not null references accounts (id) on delete cascade,
  public_key_pem      text not null,
  private_key_sealed  text not null,
  state               text not null default 'pending' check (state in ('pending', 'active', 'retired', 'revoked')),
  -- KWCERT1 text signed by the account's root (modules/signing/certificate.ts)
  certificate         text not null,
  created_at          timestamptz not null,
  activate_at         timestamptz,
  activated_at        timestamptz,
  revoked_at          timestamptz,
  revoke_reason       text,
  check (state <> 'active' or activated_at is not null),
  check ((state = 'revoked') = (revoked_at is not null))
);
create index signers_account on signers (account_id, created_at desc);
-- At most one active key per account (the others were retired when it was activated).
create unique index signers_one_active on signers (account_id) where state = 'active';
-- The activation sweeper's work: scheduled keys whose time has come.
create index signers_due on signers (activate_at) where state = 'pending' and activate_at is not null;
