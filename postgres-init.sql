-- The database roles docker-compose.yml serves with (docs/operations.md, "Database roles and row-level security").
-- The postgres image runs this once, as the superuser POSTGRES_USER, when it creates the database; on a volume
-- made before, run it by hand (it may run again):
--   docker compose exec db sh -c 'psql -U "$POSTGRES_USER" -d "$POSTGRES_DB" -f /docker-entrypoint-initdb.d/coremem-roles.sql'
--
-- POSTGRES_USER runs `coremem migrate` and owns the tables. The API, the worker and the other commands log in as
-- `coremem_api`: no superuser, no BYPASSRLS, owning nothing, a member of `coremem_app` (the role migration 0016
-- grants to and the connections switch to), so row-level security binds every session it opens.
\set ON_ERROR_STOP on
\getenv api_password API_DB_PASSWORD
SELECT 'CREATE ROLE coremem_app NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE'
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'coremem_app') \gexec
SELECT 'CREATE ROLE coremem_api LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE IN ROLE coremem_app'
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'coremem_api') \gexec
GRANT coremem_app TO coremem_api;
ALTER ROLE coremem_api LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD :'api_password';
