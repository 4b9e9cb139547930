-- Cluster mode (NATS bus). Every node that shares this database forms one cluster:
-- - `cluster_identity` names it, so its NATS subjects do not mix with another deployment's (or another
--   test database's) on a shared NATS server;
-- - `cluster_changes` numbers every invalidation a writer publishes. A node compares the numbers it
--   received with the sequence's current value, so a message it missed (its connection or the
--   writer's was cut) is noticed within a second and answered by dropping its memory.
create table cluster_identity (
  id          text primary key,
  created_at  timestamptz not null default now()
);
insert into cluster_identity (id) values (substr(md5(random()::text || clock_timestamp()::text), 1, 16));

create sequence cluster_changes;
