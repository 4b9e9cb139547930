-- Offline licenses: one Ed25519 signing key pair per account, and the licenses issued with it.

-- The private key is stored only sealed with SECRET_KEY (AES-256-GCM, `v1.<iv>.<tag>.<ct>`); a dump
-- of this table cannot sign anything. Accounts created before this migration get their pair on first
-- use (Ed25519 key generation is not available in SQL).
create table signing_keys (
  account_id          text primary key references accounts (id) on delete cascade,
  kid                 text not null unique,
  algorithm           text not null default 'ed25519' check (algorithm = 'ed25519'),
  -- SubjectPublicKeyInfo, PEM: what openssl and Node's crypto read directly
  public_key_pem      text not null,
  private_key_sealed  text not null,
  created_at          timestamptz not null default now()
);

-- Every license issued, so sync can tell its status (key, device slot) and renew it with the same ttl.
-- A renewal keeps the id and records the latest issued_at/expires_at.
create table offline_licenses (
  id                  text primary key,
  account_id          text not null references accounts (id) on delete cascade,
  key_id              text not null references license_keys (id) on delete cascade,
  activation_id       text not null references activations (id) on delete cascade,
  device_fingerprint  text not null,
  ttl_seconds         integer not null check (ttl_seconds > 0),
  issued_at           timestamptz not null,
  expires_at          timestamptz not null,
  created_at          timestamptz not null default now()
);
create index offline_licenses_key on offline_licenses (key_id);
create index offline_licenses_account on offline_licenses (account_id, created_at);
