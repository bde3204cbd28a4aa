-- +goose Up
-- Never wait behind a long transaction holding users: fail the deploy step instead, and retry it.
SET LOCAL lock_timeout = '1s';

-- Emails are stored as auth.NormalizeEmail writes them and compared byte for byte, no longer
-- through lower(), whose folding follows the database's collation: it turned "admİn" (U+0130) into
-- "admin" and let a look-alike address log in as the admin. For the addresses already stored the
-- rule comes down to trimming, NFC and lower-casing ASCII letters, which SQL can do exactly
-- (translate, unlike lower(), ignores the collation). An address the rule refuses (one holding
-- such a character) stays as it was: nobody can sign in with it by email any more, and an admin
-- finds it in /admin/users to give the person a plain one.
UPDATE users SET email = translate(normalize(btrim(email), NFC), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
WHERE email <> translate(normalize(btrim(email), NFC), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
-- The database holds every writer to the rule's SQL part, a command-line tool or an old instance
-- still running during a deploy included.
ALTER TABLE users ADD CONSTRAINT users_email_normalized
    CHECK (email = btrim(translate(normalize(email, NFC), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')));

-- Failed logins are counted per email in the same form.
UPDATE login_failures SET email = translate(normalize(btrim(email), NFC), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
WHERE email <> translate(normalize(btrim(email), NFC), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');

-- A person's account at an identity provider, (issuer, subject), linked to their desk user at
-- their first sign-in by a verified email (package sso). Later sign-ins find the user by the link
-- and never by the email again, so that an email changed at the provider, or given to someone
-- else there, moves nobody onto another desk account. One link per user and issuer: another
-- subject that comes with a linked user's email is refused. email is the one the link was made
-- by, for the admin reading it.
CREATE TABLE sso_identities (
    issuer    text NOT NULL,
    subject   text NOT NULL,
    user_id   bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email     text NOT NULL,
    linked_at timestamptz NOT NULL,
    PRIMARY KEY (issuer, subject),
    UNIQUE (issuer, user_id)
);
CREATE INDEX sso_identities_user_id_idx ON sso_identities (user_id);

-- +goose Down
SET LOCAL lock_timeout = '1s';
DROP TABLE sso_identities;
ALTER TABLE users DROP CONSTRAINT users_email_normalized;
