"""Authorize.Net's official Python SDK (authorizenet on PyPI, unmodified)
against Ferrogate's emulator, with the short login and transaction key
its schema allows. A sale, its details, and a decline; then the reporting
lists: the unsettled transactions, the settled batches (with statistics)
and the transactions of the first batch, which the test settled before.
Every answer must be valid in their schema as the SDK's bindings read it
(the SDK itself falls back to a loose reading). Prints one JSON line of
what it saw. Environment: ENDPOINT, LOGIN, KEY."""
import json
import os
from decimal import Decimal

from authorizenet import apicontractsv1
from authorizenet.apicontrollers import (
    createTransactionController,
    getSettledBatchListController,
    getTransactionDetailsController,
    getTransactionListController,
    getUnsettledTransactionListController,
)

ENDPOINT = os.environ["ENDPOINT"]


def auth():
    a = apicontractsv1.merchantAuthenticationType()
    a.name = os.environ["LOGIN"]
    a.transactionKey = os.environ["KEY"]
    return a


def sale(amount, ref):
    card = apicontractsv1.creditCardType()
    card.cardNumber = "4111111111111111"
    card.expirationDate = "2035-12"
    card.cardCode = "999"
    payment = apicontractsv1.paymentType()
    payment.creditCard = card
    tr = apicontractsv1.transactionRequestType()
    tr.transactionType = "authCaptureTransaction"
    tr.amount = Decimal(amount)
    tr.payment = payment
    req = apicontractsv1.createTransactionRequest()
    req.merchantAuthentication = auth()
    req.refId = ref
    req.transactionRequest = tr
    ctrl = createTransactionController(req)
    ctrl.setenvironment(ENDPOINT)
    ctrl.execute()
    return ctrl.getresponse()


def run(controller, req):
    """Executes a request; its answer, which must be valid in their schema."""
    req.merchantAuthentication = auth()
    ctrl = controller(req)
    ctrl.setenvironment(ENDPOINT)
    ctrl.execute()
    apicontractsv1.CreateFromDocument(ctrl._httpResponse)
    return ctrl.getresponse()


def sorted_paged(req, order_by, descending, limit, offset):
    sorting = apicontractsv1.TransactionListSorting()
    sorting.orderBy = order_by
    sorting.orderDescending = descending
    paging = apicontractsv1.Paging()
    paging.limit = limit
    paging.offset = offset
    req.sorting = sorting
    req.paging = paging
    return req


def details(trans_id):
    req = apicontractsv1.getTransactionDetailsRequest()
    req.merchantAuthentication = auth()
    req.transId = trans_id
    ctrl = getTransactionDetailsController(req)
    ctrl.setenvironment(ENDPOINT)
    ctrl.execute()
    return ctrl.getresponse()


approved = sale("7.77", "py-1")
assert approved.messages.resultCode == "Ok", approved.messages.message[0].text
tr = approved.transactionResponse
assert str(tr.responseCode) == "1", tr.responseCode
trans_id = str(tr.transId)
seen = details(trans_id)
assert seen.messages.resultCode == "Ok"
declined = sale("5.00", "py-2")

unsettled = run(
    getUnsettledTransactionListController,
    sorted_paged(apicontractsv1.getUnsettledTransactionListRequest(), "submitTimeUTC", True, 10, 1),
)
assert unsettled.messages.resultCode == "Ok", unsettled.messages.message[0].text
unsettled_ids = [str(t.transId) for t in unsettled.transactions.transaction]

batches_req = apicontractsv1.getSettledBatchListRequest()
batches_req.includeStatistics = True
batches = run(getSettledBatchListController, batches_req)
assert batches.messages.resultCode == "Ok", batches.messages.message[0].text
batch = batches.batchList.batch[0]
listed = run(
    getTransactionListController,
    sorted_paged(apicontractsv1.getTransactionListRequest(batchId=str(batch.batchId)), "id", False, 100, 1),
)
assert listed.messages.resultCode == "Ok", listed.messages.message[0].text

print(json.dumps({
    "trans_id": trans_id,
    "account": str(tr.accountNumber),
    "auth_code": str(tr.authCode),
    "details_amount": str(seen.transaction.settleAmount),
    "declined_code": str(declined.transactionResponse.responseCode),
    "unsettled": unsettled_ids,
    "batch_id": str(batch.batchId),
    "batch_charges": str(batch.statistics.statistic[0].chargeAmount),
    "batch_transactions": [str(t.transId) for t in listed.transactions.transaction],
    "batch_total": int(listed.totalNumInResultSet),
}))
