-- Import and export of keys. An imported key keeps its own lookup:
-- - `external_id`: the other system's id, unique per account; an import skips rows whose id exists.
-- - `key_hash` stays the one column validate looks a key up by, unique across the installation. A
--   value's portable hash (the hash of its canonical form, or of its exact trimmed value when it is
--   not in Keyward's format) is stored there when no other account holds it; otherwise the key is
--   stored under an account-scoped hash derived from it, and `portable_hash` keeps the portable one
--   (export writes it). Two accounts may hold the same imported value.
-- - Hash-only imports (`key_sha256`): the key waits under a hash derived from the account and the
--   SHA-256; the side table keeps that SHA-256 (for export) until the first validate re-hashes the key.
alter table license_keys
  add column external_id   text check (char_length(external_id) between 1 and 200),
  add column portable_hash text;
create unique index license_keys_external_id on license_keys (account_id, external_id) where external_id is not null;
create index license_keys_portable_hash on license_keys (portable_hash) where portable_hash is not null;

create table key_sha256_imports (
  key_id     text primary key references license_keys (id) on delete cascade,
  account_id text not null references accounts (id) on delete cascade,
  sha256     text not null,
  unique (account_id, sha256)
);
