-- The agents of agents.yaml (and of tests/unit/connectors/test_yaml_agents.py), in SQL.
CREATE CONNECTION conn WITH ('type' = 'scripted', 'responder' = 'tests.unit.engine.test_react:adds_twice');
CREATE MODEL llm WITH ('connection' = 'conn');
CREATE FUNCTION add AS 'tests.unit.engine.test_react.add' LANGUAGE PYTHON;
CREATE TOOL add USING FUNCTION add WITH ('type' = 'function', 'injected_args.b' = 'config:step');
CREATE PROMPT adder WITH ('messages' = '[{"role": "system", "content": "You add numbers."},
                                         {"role": "user", "content": "{input}"}]');
CREATE AGENT react
  USING MODEL llm
  USING PROMPT adder
  USING TOOLS add
  WITH (
    'max_iterations' = '5',
    'handle_exception' = 'continue',
    'tokens_management_strategy' = 'TRIM',
    'max_tokens_threshold' = '2000',
    'config.step' = 10
  );

-- A reflection agent: a drafter and a critic, each a standard agent.
CREATE CONNECTION w WITH ('type' = 'scripted', 'responder' = 'tests.agents:draft_by_version');
CREATE CONNECTION c WITH ('type' = 'scripted', 'responder' = 'tests.agents:critic_by_version');
CREATE MODEL w_model WITH ('connection' = 'w');
CREATE MODEL c_model WITH ('connection' = 'c');
CREATE AGENT writer USING MODEL w_model USING PROMPT 'You write haiku.';
CREATE AGENT editor USING MODEL c_model USING PROMPT 'You judge haiku.';
CREATE AGENT haiku USING AGENTS writer, editor
  COMMENT 'drafts a haiku until the editor approves it'
  WITH ('type' = 'reflection', 'max_iterations' = '2', 'confidence_value' = '0.8');
