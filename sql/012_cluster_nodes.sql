-- Cluster membership that does not depend on the bus being up (see src/infra/cluster-nodes.ts).
-- Every node renews its row a few times a second: `heard_at` says it is alive and may hold memory,
-- `seen_seq` that every change numbered up to it (cluster_changes) has reached its memory. A writer
-- that cannot get a node's ack over NATS reads the row instead, and without either waits until the
-- node's trust in its memory has run out (it can only renew that trust through this row).
create table cluster_nodes (
  id        text primary key,
  seen_seq  bigint not null default 0,
  heard_at  timestamptz not null default now()
);

-- A node's renewal, in this order: its row first (locked until the function's statement ends), then
-- the change sequence. A writer's `cluster_announce` takes its number, then reads the rows FOR SHARE:
-- so a renewal either read the sequence after the writer's number or is visible to the writer.
create function cluster_beat(node text, seen bigint) returns bigint language plpgsql as $$
declare
  v bigint;
  called boolean;
begin
  insert into cluster_nodes (id, seen_seq, heard_at) values (node, seen, now())
    on conflict (id) do update set seen_seq = excluded.seen_seq, heard_at = excluded.heard_at;
  delete from cluster_nodes where heard_at < now() - interval '10 minutes';
  select last_value, is_called into v, called from cluster_changes;
  return case when called then v else 0 end;
end $$;

-- A writer after its commit: the change's number, then every other node that renewed within `window_ms`.
create function cluster_announce(node text, window_ms integer, out seq bigint, out members text[]) language plpgsql as $$
begin
  seq := nextval('cluster_changes');
  select coalesce(array_agg(id), '{}') into members from (
    select id from cluster_nodes
     where id <> node and heard_at > clock_timestamp() - make_interval(secs => window_ms / 1000.0)
     for share
  ) live;
end $$;
