-- 0012_message_parts: a user message's content parts (text and images, inline image bytes
-- in base64) as JSON, NULL for a message of text only; content keeps their text view.
ALTER TABLE conversation ADD COLUMN parts TEXT;
