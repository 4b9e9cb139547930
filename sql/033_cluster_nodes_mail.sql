-- Each node says in its membership row whether it can send key emails (SMTP_URL and MAIL_FROM set), so
-- /readyz on a node without them warns when other live nodes have them (docs/operations.md). An older
-- node keeps calling the two-argument cluster_beat, which leaves the column null: "not said".
alter table cluster_nodes add column can_mail boolean;

create function cluster_beat(node text, seen bigint, mail boolean) returns bigint language plpgsql as $$
declare
  v bigint;
  called boolean;
begin
  insert into cluster_nodes (id, seen_seq, heard_at, can_mail) values (node, seen, now(), mail)
    on conflict (id) do update set seen_seq = excluded.seen_seq, heard_at = excluded.heard_at, can_mail = excluded.can_mail;
  delete from cluster_nodes where heard_at < now() - interval '10 minutes';
  select last_value, is_called into v, called from cluster_changes;
  return case when called then v else 0 end;
end $$;
