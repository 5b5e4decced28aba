// Run by the interop test: ali-ons (a pure-JS RocketMQ client) looks up a route from our
// NameServer, prints what it parsed, and sends one message to the broker the route names.
'use strict';
const { Producer, Message } = require('ali-ons');
const [namesrv, topic] = process.argv.slice(2);
(async () => {
  const producer = new Producer({ nameSrv: namesrv, httpclient: {}, producerGroup: 'PG_INTEROP_JS',
    instanceName: 'interop' });
  producer.on('error', (e) => console.error('producer error', e.message));
  await producer.ready();
  const route = await producer._mqClient.getTopicRouteInfoFromNameServer(topic, 3000);
  const sent = await producer.send(new Message(topic, 'TagA', 'hello from ali-ons'));
  console.log(JSON.stringify({ route, sendStatus: sent.sendStatus }));
  await producer.close();
  process.exit(0);
})().catch((e) => { console.error('FATAL', e && e.stack || e); process.exit(1); });
