#!/usr/bin/env node
// redis-streams-dlq: the dead-letter commands alone (also `redis-streams dlq …`).
import { dlqMain, DLQ_BIN_SHORT_USAGE } from './dlq-main.js';
import { runMain } from './run-command.js';

runMain('redis-streams-dlq', dlqMain, DLQ_BIN_SHORT_USAGE);
