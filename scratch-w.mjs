import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { Module } from '@nestjs/common';
import { RedisStreamsServer, RedisStreamsClient } from 'nestjs-redis-streams';
import { inspect } from 'node:util';
import { lastValueFrom } from 'rxjs';
const url = process.env.URL ?? 'redis://default:WRONGsecret@127.0.0.1:16399';
class M {}
Module({})(M);
const mode = process.argv[2];
if (mode === 'client') {
  const c = new RedisStreamsClient({ connection: url });
  c.on('error', (e) => console.log('EVENT', inspect(e)));
  try { await lastValueFrom(c.emit('orders', {a:1})) } catch (e) { console.log('EMIT', inspect(e)); }
  try { await lastValueFrom(c.send('orders', {a:1})) } catch (e) { console.log('SEND', inspect(e)); }
  await c.close();
} else {
  const s = new RedisStreamsServer({ connection: url, group: 'g', consumer: 'c' });
  s.on('error', (e) => console.log('EVENT', inspect(e)));
  const app = await NestFactory.createMicroservice(M, { strategy: s });
  s.addHandler('orders', async () => {}, true);
  console.log('HEALTH', inspect(await s.health()));
  await app.listen();
}
