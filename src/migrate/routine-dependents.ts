import type pg from 'pg';
import type { RoutineFile } from './sql-files.js';

/**
 * What a DROP ... CASCADE of the object would remove besides the object
 * itself and what the files create again, described one entry each (`view
 * public.report`, `trigger t on table x`); empty when the files recreate all
 * of it.
 *
 * Follows pg_depend as the cascade does: to every object that depends on a
 * reached one, and from an internal part (a view's rewrite rule, a row type)
 * to the object it is part of. What the files recreate: a function of
 * schema asset_webhooks named as a file of sql/functions, a view named as a
 * file of sql/dependents with its rule and row type, and a column default of
 * a table of the schema when sql/dependents has a file named
 * `<table>_<column>_default.sql`.
 */
export async function unrecreatedDependents(
  client: pg.PoolClient,
  catalog: 'pg_proc' | 'pg_class',
  oid: number,
  files: readonly RoutineFile[],
): Promise<string[]> {
  const functions = files.filter((file) => file.kind === 'function').map((file) => file.name);
  const dependents = files.filter((file) => file.kind === 'dependent').map((file) => file.name);
  const { rows } = await client.query<{ what: string }>(
    `with recursive reached(classid, objid, objsubid) as (
       select $1::regclass::oid, $2::oid, 0
       union
       select o.classid, o.objid, o.objsubid
       from reached r
       join pg_catalog.pg_depend d
         on (d.refclassid = r.classid and d.refobjid = r.objid and (r.objsubid = 0 or d.refobjsubid = r.objsubid)
             and d.deptype in ('n', 'a', 'i'))
         or (d.classid = r.classid and d.objid = r.objid and d.objsubid = r.objsubid and d.deptype = 'i')
       cross join lateral (
         select case when d.classid = r.classid and d.objid = r.objid then d.refclassid else d.classid end,
                case when d.classid = r.classid and d.objid = r.objid then d.refobjid else d.objid end,
                case when d.classid = r.classid and d.objid = r.objid then d.refobjsubid else d.objsubid end
       ) o(classid, objid, objsubid)
     ),
     -- A rule or a row type (or an array of one) stands for its relation.
     owners as (
       select distinct
              case when r.classid = 'pg_rewrite'::regclass then 'pg_class'::regclass::oid
                   when r.classid = 'pg_type'::regclass and rel.oid is not null then 'pg_class'::regclass::oid
                   else r.classid end as classid,
              case when r.classid = 'pg_rewrite'::regclass then (select w.ev_class from pg_catalog.pg_rewrite w where w.oid = r.objid)
                   when r.classid = 'pg_type'::regclass and rel.oid is not null then rel.oid
                   else r.objid end as objid
       from reached r
       left join lateral (
         select coalesce(nullif(t.typrelid, 0), nullif(e.typrelid, 0)) as oid
         from pg_catalog.pg_type t left join pg_catalog.pg_type e on e.oid = t.typelem
         where r.classid = 'pg_type'::regclass and t.oid = r.objid
       ) rel on true
       where r.objsubid = 0 or r.classid <> 'pg_class'::regclass
     )
     select pg_describe_object(o.classid, o.objid, 0) as what
     from owners o
     where not (o.classid = $1::regclass::oid and o.objid = $2::oid)
       and not case
         when o.classid = 'pg_proc'::regclass then exists (
           select 1 from pg_catalog.pg_proc p
           where p.oid = o.objid and p.pronamespace = 'asset_webhooks'::regnamespace and p.proname = any($3::text[]))
         when o.classid = 'pg_class'::regclass then exists (
           select 1 from pg_catalog.pg_class c
           where c.oid = o.objid and c.relnamespace = 'asset_webhooks'::regnamespace and c.relkind = 'v'
             and c.relname = any($4::text[]))
         when o.classid = 'pg_attrdef'::regclass then exists (
           select 1 from pg_catalog.pg_attrdef a
           join pg_catalog.pg_class c on c.oid = a.adrelid
           join pg_catalog.pg_attribute t on t.attrelid = a.adrelid and t.attnum = a.adnum
           where a.oid = o.objid and c.relnamespace = 'asset_webhooks'::regnamespace
             and c.relname || '_' || t.attname || '_default' = any($4::text[]))
         else false
       end
     order by 1`,
    [catalog, oid, functions, dependents],
  );
  return rows.map((row) => row.what);
}
