// The official RocketMQ 5 Node.js client against halfmq: NORMAL (tag, keys, property), FIFO,
// a committed TRANSACTION and a DELAY message sent, then all four received and acked.
// Prints one JSON line per event; the endpoint and topic come from argv.
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const [endpoints, topic, group] = process.argv.slice(2);
const say = (event) => console.log(JSON.stringify(event));

(async () => {
  const producer = new Producer({ endpoints, checker: { async check() { return 1; } } });
  await producer.startup();
  const plain = await producer.send({
    topic, tag: 'TagA', keys: ['k1'], properties: new Map([['color', 'red']]), body: Buffer.from('plain'),
  });
  const fifo = await producer.send({ topic, messageGroup: 'g1', body: Buffer.from('fifo') });
  const transaction = producer.beginTransaction();
  const committed = await producer.send({ topic, body: Buffer.from('transaction') }, transaction);
  await transaction.commit();
  const deliverAt = Date.now() + 1500;
  const delayed = await producer.send({ topic, body: Buffer.from('delayed'), deliveryTimestamp: new Date(deliverAt) });
  say({ sent: [plain.messageId, fifo.messageId, committed.messageId, delayed.messageId], deliverAt,
        transactionId: committed.transactionId });
  const consumer = new SimpleConsumer({
    consumerGroup: group, endpoints, subscriptions: new Map().set(topic, '*'), awaitDuration: 3000,
  });
  await consumer.startup();
  const received = [];
  for (let round = 0; round < 10 && received.length < 4; round++) {
    for (const message of await consumer.receive(16, 10000)) {
      received.push({ messageId: message.messageId, body: message.body.toString(), tag: message.tag || null,
                      keys: message.keys, properties: Object.fromEntries(message.properties),
                      messageGroup: message.messageGroup || null, at: Date.now() });
      await consumer.ack(message);
    }
  }
  say({ received });
  process.exit(0);
})().catch((error) => { say({ error: String(error) }); process.exit(1); });
