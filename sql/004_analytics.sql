-- Analytics rollups, maintained by triggers in the same transaction as the change they count, so no
-- code path (validate, offline licenses, product deletion, bulk loads) can forget them and every
-- figure is exactly as fresh as the system of record.
--
-- Hot rows: each counter is split into 8 shards (hash of the counted row's id), so concurrent new
-- activations of one account/product/day, or concurrent key creations of one account, rarely wait
-- on the same row lock; readers sum at most 8 rows per group. Triggers are statement-level with
-- transition tables (one aggregated upsert per statement, so bulk loads, sweeper batches and cascading
-- deletes stay cheap), except activation updates: a row-level trigger whose WHEN clause filters out
-- the frequent, irrelevant ones (last_validated_at, deactivation) before any function is called.

-- Keys per account: total and stored-active. The effective active count subtracts the (few, indexed)
-- stored-active keys whose expires_at has passed but which the sweeper has not turned yet.
create table analytics_key_counts (
  account_id  text not null references accounts (id) on delete cascade,
  shard       smallint not null,
  total       bigint not null default 0,
  active      bigint not null default 0,
  primary key (account_id, shard)
) with (fillfactor = 50);

-- New activations per account, UTC day and product (the trend, activations_today).
create table analytics_daily_activations (
  account_id   text not null references accounts (id) on delete cascade,
  day          date not null,
  product_id   text not null,
  shard        smallint not null,
  activations  bigint not null default 0,
  primary key (account_id, day, product_id, shard)
) with (fillfactor = 70);
create index analytics_daily_activations_product on analytics_daily_activations (account_id, product_id, day);

-- Activations per account and country, all time (geography, total_activations). Country '' holds the
-- activations without a two-letter country: they count in total_activations, not in geography.
create table analytics_country_activations (
  account_id   text not null references accounts (id) on delete cascade,
  country      text not null,
  shard        smallint not null,
  activations  bigint not null default 0,
  primary key (account_id, country, shard)
) with (fillfactor = 70);

-- expiring_soon and the not-yet-swept expired keys, per account (the 001 index is not per account).
create index license_keys_account_expiring on license_keys (account_id, expires_at)
  where status = 'active' and expires_at is not null;

create function analytics_shard(id text) returns smallint
  language sql immutable parallel safe
  as $$ select (hashtext(id) & 7)::smallint $$;

create function analytics_country(country text) returns text
  language sql immutable parallel safe
  as $$ select case when country ~ '^[A-Za-z]{2}$' then upper(country) else '' end $$;

create function analytics_utc_day(at timestamptz) returns date
  language sql stable parallel safe
  as $$ select (at at time zone 'UTC')::date $$;

-- Lock order. Every statement takes rollup row locks in key order (inserts sort their rows; decrements
-- lock with `order by ... for update` first), so two multi-row statements cannot deadlock on them.
-- Deletes (product deletion cascades, one statement per key) also take a per-account advisory lock, so
-- two transactions that each decrement across several statements queue instead of deadlocking.
create function analytics_lock_accounts(account_ids text[]) returns void language plpgsql as $$
declare
  a text;
begin
  foreach a in array coalesce((select array_agg(distinct x order by x) from unnest(account_ids) as x), '{}') loop
    perform pg_advisory_xact_lock(7202612, hashtext(a));
  end loop;
end $$;

-- Activations --------------------------------------------------------------------------------------

create function analytics_activations_inserted() returns trigger language plpgsql as $$
begin
  insert into analytics_daily_activations as d (account_id, day, product_id, shard, activations)
    select account_id, analytics_utc_day(activated_at), product_id, analytics_shard(id), count(*)
    from new_rows group by 1, 2, 3, 4 order by 1, 2, 3, 4
    on conflict (account_id, day, product_id, shard) do update set activations = d.activations + excluded.activations;
  insert into analytics_country_activations as c (account_id, country, shard, activations)
    select account_id, analytics_country(country), analytics_shard(id), count(*)
    from new_rows group by 1, 2, 3 order by 1, 2, 3
    on conflict (account_id, country, shard) do update set activations = c.activations + excluded.activations;
  return null;
end $$;

-- Decrements only update (never insert): the rows exist since the insert, and an account being
-- deleted (cascade) must not get rollup rows re-inserted.
create function analytics_activations_deleted() returns trigger language plpgsql as $$
begin
  perform analytics_lock_accounts(array(select distinct account_id from old_rows));
  perform 1 from analytics_daily_activations d
    where (d.account_id, d.day, d.product_id, d.shard) in
      (select account_id, analytics_utc_day(activated_at), product_id, analytics_shard(id) from old_rows)
    order by d.account_id, d.day, d.product_id, d.shard for update;
  update analytics_daily_activations d set activations = d.activations - o.n
    from (select account_id, analytics_utc_day(activated_at) as day, product_id, analytics_shard(id) as shard, count(*) as n
          from old_rows group by 1, 2, 3, 4) o
    where d.account_id = o.account_id and d.day = o.day and d.product_id = o.product_id and d.shard = o.shard;
  perform 1 from analytics_country_activations c
    where (c.account_id, c.country, c.shard) in (select account_id, analytics_country(country), analytics_shard(id) from old_rows)
    order by c.account_id, c.country, c.shard for update;
  update analytics_country_activations c set activations = c.activations - o.n
    from (select account_id, analytics_country(country) as country, analytics_shard(id) as shard, count(*) as n
          from old_rows group by 1, 2, 3) o
    where c.account_id = o.account_id and c.country = o.country and c.shard = o.shard;
  return null;
end $$;

-- No route changes these columns; the trigger keeps the rollups right if one ever does (one row at a
-- time: a bulk rewrite of activated_at should run while no activations are being created).
create function analytics_activation_moved() returns trigger language plpgsql as $$
begin
  update analytics_daily_activations set activations = activations - 1
    where account_id = old.account_id and day = analytics_utc_day(old.activated_at)
      and product_id = old.product_id and shard = analytics_shard(old.id);
  update analytics_country_activations set activations = activations - 1
    where account_id = old.account_id and country = analytics_country(old.country) and shard = analytics_shard(old.id);
  insert into analytics_daily_activations as d (account_id, day, product_id, shard, activations)
    values (new.account_id, analytics_utc_day(new.activated_at), new.product_id, analytics_shard(new.id), 1)
    on conflict (account_id, day, product_id, shard) do update set activations = d.activations + 1;
  insert into analytics_country_activations as c (account_id, country, shard, activations)
    values (new.account_id, analytics_country(new.country), analytics_shard(new.id), 1)
    on conflict (account_id, country, shard) do update set activations = c.activations + 1;
  return null;
end $$;

create trigger analytics_activations_insert after insert on activations
  referencing new table as new_rows for each statement execute function analytics_activations_inserted();
create trigger analytics_activations_delete after delete on activations
  referencing old table as old_rows for each statement execute function analytics_activations_deleted();
-- Row-level with WHEN: the frequent last_validated_at/status updates never call a function.
create trigger analytics_activations_update after update on activations for each row
  when (old.activated_at is distinct from new.activated_at or old.country is distinct from new.country
        or old.product_id is distinct from new.product_id or old.account_id is distinct from new.account_id)
  execute function analytics_activation_moved();

-- License keys -------------------------------------------------------------------------------------

create function analytics_keys_inserted() returns trigger language plpgsql as $$
begin
  insert into analytics_key_counts as k (account_id, shard, total, active)
    select account_id, analytics_shard(id), count(*), count(*) filter (where status = 'active')
    from new_rows group by 1, 2 order by 1, 2
    on conflict (account_id, shard) do update set total = k.total + excluded.total, active = k.active + excluded.active;
  return null;
end $$;

-- Revoke, extend, the expiry sweeper's batches: only a change of stored status moves a count. The
-- sweeper updates many keys in one statement, so the change is aggregated and applied in key order.
create function analytics_keys_updated() returns trigger language plpgsql as $$
begin
  insert into analytics_key_counts as k (account_id, shard, total, active)
    select account_id, shard, sum(total), sum(active) from (
        select n.account_id, analytics_shard(n.id) as shard, 1 as total, (n.status = 'active')::int as active
        from new_rows n join old_rows o on o.id = n.id
        where o.status is distinct from n.status or o.account_id is distinct from n.account_id
      union all
        select o.account_id, analytics_shard(o.id), -1, -(o.status = 'active')::int
        from new_rows n join old_rows o on o.id = n.id
        where o.status is distinct from n.status or o.account_id is distinct from n.account_id
    ) change
    group by 1, 2 having sum(total) <> 0 or sum(active) <> 0 order by 1, 2
    on conflict (account_id, shard) do update set total = k.total + excluded.total, active = k.active + excluded.active;
  return null;
end $$;

create function analytics_keys_deleted() returns trigger language plpgsql as $$
begin
  perform analytics_lock_accounts(array(select distinct account_id from old_rows));
  perform 1 from analytics_key_counts k
    where (k.account_id, k.shard) in (select account_id, analytics_shard(id) from old_rows)
    order by k.account_id, k.shard for update;
  update analytics_key_counts k set total = k.total - o.total, active = k.active - o.active
    from (select account_id, analytics_shard(id) as shard, count(*) as total, count(*) filter (where status = 'active') as active
          from old_rows group by 1, 2) o
    where k.account_id = o.account_id and k.shard = o.shard;
  return null;
end $$;

create trigger analytics_keys_insert after insert on license_keys
  referencing new table as new_rows for each statement execute function analytics_keys_inserted();
create trigger analytics_keys_update after update on license_keys
  referencing old table as old_rows new table as new_rows for each statement execute function analytics_keys_updated();
create trigger analytics_keys_delete after delete on license_keys
  referencing old table as old_rows for each statement execute function analytics_keys_deleted();

-- Backfill from rows written before this migration. The triggers above already hold their tables'
-- share row exclusive lock until this transaction commits, so no write can slip between the two.
insert into analytics_key_counts (account_id, shard, total, active)
  select account_id, analytics_shard(id), count(*), count(*) filter (where status = 'active')
  from license_keys group by 1, 2;
insert into analytics_daily_activations (account_id, day, product_id, shard, activations)
  select account_id, analytics_utc_day(activated_at), product_id, analytics_shard(id), count(*)
  from activations group by 1, 2, 3, 4;
insert into analytics_country_activations (account_id, country, shard, activations)
  select account_id, analytics_country(country), analytics_shard(id), count(*)
  from activations group by 1, 2, 3;
