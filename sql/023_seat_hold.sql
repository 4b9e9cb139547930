-- A released seat stays taken until every node has dropped the released device from memory (the
-- release's invalidation is in force: acks, seen rows or trust windows). Set by the release's own
-- transaction, cleared by the releasing node once its invalidation returned; the time bounds it when
-- that node dies in between. Slot decisions count held seats as taken (modules/activations/repo.ts).
alter table activations add column seat_held_until timestamptz;

create index activations_seat_held on activations (key_id) where seat_held_until is not null;
