-- Validate calls counted per account and UTC day: the daily quota and api_calls_today. The counters
-- (Redis or memory) stay the fast path; their batched flush adds each node's counts here, so a Redis
-- that comes back empty, or a restarted node, restores the day's count instead of handing out a fresh
-- quota. One row per account and day that had calls.
create table daily_validate_calls (
  account_id  text not null references accounts (id) on delete cascade,
  day         date not null,
  calls       bigint not null default 0,
  primary key (account_id, day)
);
