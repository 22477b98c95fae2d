-- The binding of your asset schema: replace this file with yours (a copy of
-- sql/bindings/reference.sql pointed at your tables; docs/writing-a-binding.md),
-- or replace the ConfigMap in an overlay (docs/operations.md, "First deploy").
-- The migration init container of every pod runs it with
-- `asset-webhooks migrate --binding`, in one transaction, and this placeholder
-- stops it there, so that no pod runs against a database without capture.
do $$
begin
  raise exception 'deploy/kubernetes/binding.sql: expected the binding of your asset schema, got the placeholder shipped with the manifests (docs/operations.md, "First deploy")';
end
$$;
