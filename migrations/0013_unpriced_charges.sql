-- A settled call's cost_usd is NULL when its model had no price (shown as "unpriced", never $0).
-- Calls settled before this rule stored 0: a call that used tokens, reserved nothing and cost nothing
-- had no price.
UPDATE `llm_charges` SET `cost_usd` = NULL
WHERE `status` = 'settled' AND `cost_usd` = 0 AND `reserved_cost_usd` = 0 AND coalesce(`total_tokens`, 0) > 0;
