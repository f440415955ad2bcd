-- 0007_message_parts: SQLite's 0012 (read it for why).
ALTER TABLE conversation ADD COLUMN parts TEXT;
