-- Successful attempts are logged one row per batch and webhook (issue 26: the attempt log was the largest
-- write left on the happy path).
--
-- A success is the end of its delivery: the delivery row is deleted (031) and the attempt is its only
-- record. Logged as a row of `webhook_attempts`, each success cost a heap row, an entry in each of the
-- table's four indexes and a foreign-key check of its webhook: with the delete and the claim, most of
-- Postgres's ≈28 µs per delivery. The worker logs results in batches of up to 500 anyway
-- (queue.ts logAttempts), so the successes of one batch for one webhook are now one row here, the attempts
-- as a JSON array: one heap row, three index entries and one foreign-key check per webhook per batch.
-- Measured on the development machine (`bun run bench:webhooks`, 20,000-event bursts, runs alternating
-- with the code before): Postgres CPU per delivery 23-28 µs before, 20-25 µs after.
--
-- Retries, final failures, 410s, unsignable rows and /test sends stay rows of `webhook_attempts`: they
-- are rare, and retention keeps the whole history of a delivery still in progress, which needs each of
-- its attempts by delivery. Every attempt, from either table, is a row of the view `webhook_attempt_log`.
--
-- Each element of `attempts`: [id, delivery_id, event_id, event_type, attempt, status_code, duration_ms];
-- a success has no error, and its time is the row's `created_at` (the batch's statement time, which is
-- what every attempt of the batch had as `created_at` before).

create table webhook_successes (
  id          bigint generated always as identity primary key,
  webhook_id  text not null references webhooks (id) on delete cascade,
  account_id  text not null,
  created_at  timestamptz not null default now(),
  -- how many attempts `attempts` holds (GET /v1/webhooks/:id reads only as many rows as its last 20 need)
  n           integer not null,
  attempts    jsonb not null
);
create index webhook_successes_webhook on webhook_successes (webhook_id, created_at desc, id desc);
create index webhook_successes_created on webhook_successes (created_at);

-- One row per attempt, whichever table holds it: for operators, and the one place that knows both forms.
create view webhook_attempt_log as
  select id, webhook_id, delivery_id, account_id, event_id, event_type, attempt, status_code, success, duration_ms,
         error, created_at
  from webhook_attempts
  union all
  select a->>0, s.webhook_id, (a->>1)::bigint, s.account_id, a->>2, a->>3, (a->>4)::int, (a->>5)::int, true,
         (a->>6)::int, null::text, s.created_at
  from webhook_successes s, jsonb_array_elements(s.attempts) a;

-- As in 031, but the successes of the batch go to webhook_successes, one row per webhook.
create or replace function webhook_log_attempts(batch text)
returns table (delivery_id bigint)
language plpgsql volatile
set enable_bitmapscan = off
set enable_seqscan = off
as $$
#variable_conflict use_column
begin
  return query with input as (
    select * from json_to_recordset(batch::json) as t(delivery_id bigint, prev int, status text, delay_secs float8,
      attempt_id text, event_type text, status_code int, success bool, duration_ms int, error text)
  ), locked as (
    select d.id, d.attempts from webhook_deliveries d
    where d.id = any (array(select i.delivery_id from input i)) order by d.id for update
  ), current as (
    select i.* from input i join locked l on l.id = i.delivery_id and l.attempts = i.prev
  ), done as (
    delete from webhook_deliveries w using current i
    where w.id = i.delivery_id and i.status = 'succeeded'
    returning w.id, w.webhook_id, w.account_id, w.event_id, i.attempt_id, i.event_type, i.prev, i.status_code,
      i.duration_ms
  ), moved as (
    update webhook_deliveries w set
      status = case when w.status = 'cancelled' then 'cancelled' else i.status end,
      attempts = i.prev + 1,
      next_attempt_at = case when i.status = 'pending' then now() + make_interval(secs => i.delay_secs) else w.next_attempt_at end,
      leased_until = null,
      updated_at = now()
    from current i
    where w.id = i.delivery_id and i.status <> 'succeeded'
    returning w.id, w.webhook_id, w.account_id, w.event_id, i.attempt_id, i.event_type, i.prev, i.status_code,
      i.success, i.duration_ms, i.error
  ), succeeded as (
    insert into webhook_successes (webhook_id, account_id, n, attempts)
    select d.webhook_id, min(d.account_id), count(*),
      jsonb_agg(jsonb_build_array(d.attempt_id, d.id, d.event_id, d.event_type, d.prev + 1, d.status_code, d.duration_ms))
    from done d group by d.webhook_id
    returning 1
  ), failed as (
    insert into webhook_attempts as a
      (id, webhook_id, delivery_id, account_id, event_id, event_type, attempt, status_code, success, duration_ms, error)
    select m.attempt_id, m.webhook_id, m.id, m.account_id, m.event_id, m.event_type, m.prev + 1, m.status_code, m.success,
           m.duration_ms, m.error
    from moved m
    returning a.delivery_id
  )
  -- `succeeded` is written whether or not it is read (a data-modifying CTE always runs to completion)
  select d.id from done d union all select f.delivery_id from failed f;
end
$$;
