-- subagents.yaml (tests.agents:delegating_agent) in SQL: an agent named in USING TOOLS is
-- called as a sub-agent; `general-purpose` (quoted: it holds a -) is the built-in one.
CREATE CONNECTION conn WITH ('type' = 'scripted', 'responder' = 'tests.agents:boss_model');
CREATE MODEL llm WITH ('connection' = 'conn');
CREATE FUNCTION add AS 'eddies.demo.add' LANGUAGE PYTHON;
CREATE TOOL add USING FUNCTION add WITH ('type' = 'function');
CREATE AGENT boss USING MODEL llm USING TOOLS reviewer, `general-purpose`, add
  WITH ('request_timeout' = 2e9);

CREATE CONNECTION critic_conn WITH ('type' = 'scripted', 'responder' = 'tests.agents:reviewer_model');
CREATE MODEL critic WITH ('connection' = 'critic_conn');
CREATE AGENT reviewer USING MODEL critic USING TOOLS add
  COMMENT 'Reviews a text and scores it.'
  WITH ('request_timeout' = 2e9);
