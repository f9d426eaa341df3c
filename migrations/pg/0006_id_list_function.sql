-- Hand-written: a JSON array of strings as a text[], for `column = ANY(…)` over a list of ids bound as
-- one JSON text (the statement text SQLite runs with `IN (SELECT value FROM json_each(…))`).
--
-- Why not `IN (SELECT jsonb_array_elements_text(…))`: the planner cannot see the list's length, and
-- right after a bulk insert (a generate-all of 10,000 children, column statistics not gathered yet) it
-- took the table's side for one row and joined the 10,000 ids in a nested loop: 50 million comparisons,
-- 16 s to cancel. IMMUTABLE lets the planner evaluate the call on a bound value once, so `= ANY` sees a
-- constant array of known length and looks the ids up in the index.
CREATE FUNCTION "combine_text_array"(list jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN ARRAY(SELECT jsonb_array_elements_text(list));
