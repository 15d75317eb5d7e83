-- Create the runtime login with a password before engram's first migration; the migration
-- keeps an existing role as it is. The attributes match what migration 0001 would create.
CREATE ROLE engram_runtime LOGIN PASSWORD 'runtime-change-me'
    NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT;
