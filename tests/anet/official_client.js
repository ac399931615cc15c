// Drives Ferrogate's Authorize.Net emulator with Authorize.Net's official
// Node.js SDK (npm `authorizenet`, unmodified), pointed at Ferrogate by its
// endpoint setting only. Run by tests/it/emulator.rs:
//
//   ENDPOINT=http://127.0.0.1:PORT/xml/v1/request.api?developer=ID \
//   LOGIN=<user id> KEY=<user api key> PHASE=charge|refund node official_client.js
//
// The refund phase (FIRST, LAST: when the sale's batch settled, as
// dateTimes; SALE: its transId) lists the batch first.
//
// Prints one JSON object of what it saw; exits non-zero on any surprise.
'use strict';

const { APIContracts: C, APIControllers: K } = require('authorizenet');

const endpoint = process.env.ENDPOINT;
const phase = process.env.PHASE || 'charge';

function auth() {
  const a = new C.MerchantAuthenticationType();
  a.setName(process.env.LOGIN);
  a.setTransactionKey(process.env.KEY);
  return a;
}

// One request through one controller, answered as the SDK's response class.
function call(Controller, Response, request) {
  return new Promise((resolve, reject) => {
    const ctrl = new Controller(request.getJSON());
    ctrl.setEnvironment(endpoint);
    ctrl.execute(() => {
      const raw = ctrl.getResponse();
      if (raw === null || typeof raw !== 'object') {
        reject(new Error('not a JSON object: ' + JSON.stringify(raw)));
        return;
      }
      resolve(new Response(raw));
    });
  });
}

function check(condition, what, detail) {
  if (!condition) {
    throw new Error(what + ': ' + JSON.stringify(detail));
  }
}

function card(number, expiry, code) {
  const c = new C.CreditCardType();
  c.setCardNumber(number);
  c.setExpirationDate(expiry);
  if (code) c.setCardCode(code);
  const p = new C.PaymentType();
  p.setCreditCard(c);
  return p;
}

async function transact(fields) {
  const tr = new C.TransactionRequestType();
  tr.setTransactionType(fields.type);
  if (fields.amount !== undefined) tr.setAmount(fields.amount);
  if (fields.payment) tr.setPayment(fields.payment);
  if (fields.ref) tr.setRefTransId(fields.ref);
  if (fields.invoice) {
    const o = new C.OrderType();
    o.setInvoiceNumber(fields.invoice);
    o.setDescription('Emulator test');
    tr.setOrder(o);
  }
  if (fields.billTo) tr.setBillTo(fields.billTo);
  const req = new C.CreateTransactionRequest();
  req.setMerchantAuthentication(auth());
  req.setRefId('ref-' + fields.type.slice(0, 10));
  req.setTransactionRequest(tr);
  const res = await call(K.CreateTransactionController, C.CreateTransactionResponse, req);
  return res;
}

function approved(res, what) {
  const tr = res.getTransactionResponse();
  check(res.getMessages().getResultCode() === C.MessageTypeEnum.OK, what + ' result code', res);
  check(tr && tr.getResponseCode() === '1', what + ' response code', res);
  check(/^[0-9]+$/.test(tr.getTransId()), what + ' numeric transId', res);
  check(tr.getMessages().getMessage()[0].getCode() === '1', what + ' message code', res);
  return tr;
}

async function details(transId) {
  const req = new C.GetTransactionDetailsRequest();
  req.setMerchantAuthentication(auth());
  req.setTransId(transId);
  const res = await call(K.GetTransactionDetailsController, C.GetTransactionDetailsResponse, req);
  check(res.getMessages().getResultCode() === C.MessageTypeEnum.OK, 'details result', res);
  return res.getTransaction();
}

async function subscriptions(out) {
  const sub = new C.ARBSubscriptionType();
  sub.setName('Tea club');
  const interval = new C.PaymentScheduleType.Interval();
  interval.setLength(1);
  interval.setUnit(C.ARBSubscriptionUnitEnum.MONTHS);
  const schedule = new C.PaymentScheduleType();
  schedule.setInterval(interval);
  schedule.setStartDate('2031-01-15');
  schedule.setTotalOccurrences(12);
  schedule.setTrialOccurrences(0);
  sub.setPaymentSchedule(schedule);
  sub.setAmount(9.99);
  sub.setTrialAmount(0.0);
  sub.setPayment(card('5454545454545454', '2035-12'));
  const bill = new C.NameAndAddressType();
  bill.setFirstName('Pat');
  bill.setLastName('Doe');
  sub.setBillTo(bill);
  const create = new C.ARBCreateSubscriptionRequest();
  create.setMerchantAuthentication(auth());
  create.setSubscription(sub);
  const created = await call(K.ARBCreateSubscriptionController, C.ARBCreateSubscriptionResponse, create);
  check(created.getMessages().getResultCode() === C.MessageTypeEnum.OK, 'subscription created', created);
  const id = created.getSubscriptionId();
  check(/^[0-9]+$/.test(id), 'numeric subscriptionId', created);
  out.subscription_id = id;

  const read = async () => {
    const get = new C.ARBGetSubscriptionRequest();
    get.setMerchantAuthentication(auth());
    get.setSubscriptionId(id);
    const got = await call(K.ARBGetSubscriptionController, C.ARBGetSubscriptionResponse, get);
    check(got.getMessages().getResultCode() === C.MessageTypeEnum.OK, 'subscription read', got);
    return got.getSubscription();
  };
  const status = async () => {
    const get = new C.ARBGetSubscriptionStatusRequest();
    get.setMerchantAuthentication(auth());
    get.setSubscriptionId(id);
    const got = await call(K.ARBGetSubscriptionStatusController, C.ARBGetSubscriptionStatusResponse, get);
    check(got.getMessages().getResultCode() === C.MessageTypeEnum.OK, 'subscription status', got);
    return got.getStatus();
  };
  let s = await read();
  check(s.getAmount() === '9.99' && s.getStatus() === 'active', 'subscription as created', s);
  check(s.getPaymentSchedule().getTotalOccurrences() === '12', 'occurrences', s);
  check(s.getProfile().getPaymentProfile().getPayment().getCreditCard().getCardNumber() === 'XXXX5454', 'masked card', s);
  check((await status()) === 'active', 'status active', null);

  const change = new C.ARBSubscriptionType();
  change.setAmount(15.0);
  change.setName('Tea club plus');
  const update = new C.ARBUpdateSubscriptionRequest();
  update.setMerchantAuthentication(auth());
  update.setSubscriptionId(id);
  update.setSubscription(change);
  const updated = await call(K.ARBUpdateSubscriptionController, C.ARBUpdateSubscriptionResponse, update);
  check(updated.getMessages().getResultCode() === C.MessageTypeEnum.OK, 'subscription updated', updated);
  s = await read();
  check(s.getAmount() === '15.00' && s.getName() === 'Tea club plus', 'subscription as updated', s);

  const cancel = new C.ARBCancelSubscriptionRequest();
  cancel.setMerchantAuthentication(auth());
  cancel.setSubscriptionId(id);
  const canceled = await call(K.ARBCancelSubscriptionController, C.ARBCancelSubscriptionResponse, cancel);
  check(canceled.getMessages().getResultCode() === C.MessageTypeEnum.OK, 'subscription canceled', canceled);
  check((await status()) === 'canceled', 'status canceled', null);

  // Trials are not supported: an Authorize.Net-shaped error.
  schedule.setTrialOccurrences(1);
  sub.setTrialAmount(1.0);
  const trial = await call(K.ARBCreateSubscriptionController, C.ARBCreateSubscriptionResponse, create);
  check(trial.getMessages().getResultCode() === C.MessageTypeEnum.ERROR, 'trial refused', trial);
  out.trial_error = trial.getMessages().getMessage()[0].getCode();
}

async function charge() {
  const out = {};
  const test = new C.AuthenticateTestRequest();
  test.setMerchantAuthentication(auth());
  const authenticated = await call(K.AuthenticateTestController, C.AuthenticateTestResponse, test);
  check(authenticated.getMessages().getResultCode() === C.MessageTypeEnum.OK, 'authenticateTest', authenticated);

  const bill = new C.CustomerAddressType();
  bill.setFirstName('Pat');
  bill.setLastName('Doe');
  bill.setAddress('5800 NW 39th AVE');
  bill.setZip('32606');
  const sale = approved(
    await transact({ type: C.TransactionTypeEnum.AUTHCAPTURETRANSACTION, amount: 12.34,
      payment: card('4111111111111111', '2035-12', '999'), invoice: 'INV-1', billTo: bill }),
    'sale');
  check(sale.getAccountNumber() === 'XXXX1111' && sale.getAccountType() === 'Visa', 'masked card', sale);
  check(sale.getAuthCode().length > 0, 'auth code', sale);
  check(sale.getCvvResultCode() === 'M', 'cvv match', sale);
  check(sale.getAvsResultCode() === 'Y', 'avs match', sale);
  out.sale = sale.getTransId();

  const auth_only = approved(
    await transact({ type: C.TransactionTypeEnum.AUTHONLYTRANSACTION, amount: 20,
      payment: card('5454545454545454', '12/35') }),
    'authorization');
  out.auth = auth_only.getTransId();
  const capture = approved(
    await transact({ type: C.TransactionTypeEnum.PRIORAUTHCAPTURETRANSACTION, amount: 20, ref: out.auth }),
    'prior-auth capture');
  check(capture.getTransId() === out.auth, 'capture keeps the transId', capture);

  const to_void = approved(
    await transact({ type: C.TransactionTypeEnum.AUTHCAPTURETRANSACTION, amount: 7.0,
      payment: card('4111111111111111', '2035-12') }),
    'sale to void');
  out.voided = to_void.getTransId();
  approved(await transact({ type: C.TransactionTypeEnum.VOIDTRANSACTION, ref: out.voided }), 'void');
  // A second void is their success with reason 310: nothing new happened.
  const again = await transact({ type: C.TransactionTypeEnum.VOIDTRANSACTION, ref: out.voided });
  check(again.getMessages().getResultCode() === C.MessageTypeEnum.OK, 'second void result code', again);
  check(again.getTransactionResponse().getResponseCode() === '1', 'second void response code', again);
  check(again.getTransactionResponse().getMessages().getMessage()[0].getCode() === '310', 'second void', again);

  const declined = await transact({ type: C.TransactionTypeEnum.AUTHCAPTURETRANSACTION, amount: 5.0,
    payment: card('4111111111111111', '2035-12') });
  const d = declined.getTransactionResponse();
  check(declined.getMessages().getResultCode() === C.MessageTypeEnum.ERROR, 'decline result', declined);
  check(declined.getMessages().getMessage()[0].getCode() === 'E00027', 'decline message', declined);
  check(d.getResponseCode() === '2', 'declined', declined);
  check(d.getErrors().getError()[0].getErrorCode() === '2', 'decline reason', declined);
  out.declined = d.getTransId();

  const ach = new C.PaymentType();
  const bank = new C.BankAccountType();
  bank.setRoutingNumber('072000326');
  bank.setAccountNumber('123456789');
  bank.setNameOnAccount('Pat Doe');
  ach.setBankAccount(bank);
  const refused = await transact({ type: C.TransactionTypeEnum.AUTHCAPTURETRANSACTION, amount: 3, payment: ach });
  check(refused.getTransactionResponse().getResponseCode() === '3', 'ach refused', refused);
  check(refused.getTransactionResponse().getErrors().getError()[0].getErrorCode() === '18', 'ach reason', refused);

  const saleDetails = await details(out.sale);
  check(saleDetails.getTransactionStatus() === 'capturedPendingSettlement', 'sale status', saleDetails);
  check(saleDetails.getSettleAmount() === '12.34', 'sale amount', saleDetails);
  check(saleDetails.getPayment().getCreditCard().getCardNumber() === 'XXXX1111', 'details card', saleDetails);
  check(saleDetails.getOrder().getInvoiceNumber() === 'INV-1', 'details invoice', saleDetails);
  const declinedDetails = await details(out.declined);
  check(declinedDetails.getTransactionStatus() === 'declined', 'declined status', declinedDetails);
  check(declinedDetails.getResponseReasonCode() === '2', 'declined reason', declinedDetails);

  await subscriptions(out);
  return out;
}

// The settled sale's batch, as the reporting API lists it: the batch
// settled between FIRST and LAST (with statistics), then its
// transactions, sorted and paged as the official sample asks.
async function report(out) {
  const list = new C.GetSettledBatchListRequest();
  list.setMerchantAuthentication(auth());
  list.setIncludeStatistics(true);
  list.setFirstSettlementDate(process.env.FIRST);
  list.setLastSettlementDate(process.env.LAST);
  const batches = await call(K.GetSettledBatchListController, C.GetSettledBatchListResponse, list);
  check(batches.getMessages().getResultCode() === C.MessageTypeEnum.OK, 'settled batch list', batches);
  const batch = batches.getBatchList().getBatch()[0];
  check(batch.getSettlementState() === 'settledSuccessfully', 'batch settled', batch);
  const visa = batch.getStatistics().getStatistic().find((s) => s.getAccountType() === 'Visa');
  check(visa && visa.getChargeAmount() === '12.34' && visa.getVoidCount() === '1', 'batch statistics', batch);
  out.batch_id = batch.getBatchId();

  const paging = new C.Paging();
  paging.setLimit(10);
  paging.setOffset(1);
  const sorting = new C.TransactionListSorting();
  sorting.setOrderBy(C.TransactionListOrderFieldEnum.ID);
  sorting.setOrderDescending(true);
  const get = new C.GetTransactionListRequest();
  get.setMerchantAuthentication(auth());
  get.setBatchId(out.batch_id);
  get.setPaging(paging);
  get.setSorting(sorting);
  const listed = await call(K.GetTransactionListController, C.GetTransactionListResponse, get);
  check(listed.getMessages().getResultCode() === C.MessageTypeEnum.OK, 'transaction list', listed);
  out.batch_transactions = listed.getTransactions().getTransaction().map((t) => t.getTransId());
  out.batch_total = listed.getTotalNumInResultSet();
}

async function refund() {
  const out = {};
  await report(out);
  const card_last4 = new C.CreditCardType();
  card_last4.setCardNumber('1111');
  card_last4.setExpirationDate('XXXX');
  const p = new C.PaymentType();
  p.setCreditCard(card_last4);
  const settled = await details(process.env.SALE);
  check(settled.getTransactionStatus() === 'settledSuccessfully', 'settled sale', settled);
  const r = approved(
    await transact({ type: C.TransactionTypeEnum.REFUNDTRANSACTION, amount: 2.34, ref: process.env.SALE, payment: p }),
    'refund');
  check(r.getRefTransID() === process.env.SALE, 'refund refers to the sale', r);
  out.refund = r.getTransId();
  const too_much = await transact({ type: C.TransactionTypeEnum.REFUNDTRANSACTION, amount: 50, ref: process.env.SALE, payment: p });
  check(too_much.getTransactionResponse().getResponseCode() === '3', 'refund over the sale', too_much);
  const refundDetails = await details(out.refund);
  check(refundDetails.getTransactionType() === 'refundTransaction', 'refund type', refundDetails);
  return out;
}

// The SDK logs a failed request and never calls back: the process then
// runs out of work with the phase unfinished, which is a failure too.
let finished = false;
process.on('beforeExit', () => {
  if (!finished) {
    process.stderr.write('the SDK got no answer (see its log above)\n');
    process.exitCode = 1;
  }
});

(phase === 'refund' ? refund() : charge())
  .then((out) => {
    finished = true;
    process.stdout.write(JSON.stringify(out) + '\n');
  })
  .catch((e) => {
    process.stderr.write((e && e.stack) || String(e));
    process.stderr.write('\n');
    process.exit(1);
  });
