#!/usr/bin/env node
// redis-streams: what an operator needs beside the workers. inspect, dlq, pending, consumers prune, dashboard.
import { redisStreamsMain, REDIS_STREAMS_SHORT_USAGE } from './redis-streams-main.js';
import { runMain } from './run-command.js';

runMain('redis-streams', redisStreamsMain, REDIS_STREAMS_SHORT_USAGE);
