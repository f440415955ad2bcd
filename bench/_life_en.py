"""English material of bench/_recall_life.py: a user's lasting facts, the people in their
life, what they do with them, and the questions a user asks about all of it.

Each topic is one fact a user states once (a value picked per user), with a question that
shares a search term with it ("lexical") and one that shares none ("paraphrase"); the
script checks both with the server's own term rules. Topics with ``update`` change value
during the conversations: the earlier value is stated first, the later one in a later
session, and the topic's questions are asked of the current value.
"""

from __future__ import annotations

from _recall_life import Relation, Script, Topic

TOPICS = (
    Topic(
        "diet",
        "I have been {v} for years.",
        ("vegetarian", "vegan", "pescatarian"),
        "Am I {v}?",
        "Do I eat meat?",
    ),
    Topic(
        "job",
        "I work as a {v} at the regional hospital.",
        ("nurse", "radiographer", "pharmacist", "physiotherapist"),
        "Where do I work?",
        "What is my profession?",
        update="I left the hospital and now work as a {v} at a private clinic.",
    ),
    Topic(
        "home",
        "I rent a flat in {v}, close to the river.",
        ("Porto", "Leeds", "Ghent", "Lyon", "Bologna"),
        "Which city do I rent a flat in?",
        "Where is my home?",
        update="I moved to {v} and bought a small house there.",
    ),
    Topic(
        "pet",
        "I have a golden retriever called {v}.",
        ("Biscuit", "Maple", "Pepper", "Juniper"),
        "What is my golden retriever called?",
        "What kind of animal do I own?",
    ),
    Topic(
        "coffee",
        "My favourite drink is {v} coffee without sugar.",
        ("black", "filter"),
        "How do I take my coffee?",
        "What hot beverage do I like?",
    ),
    Topic(
        "allergy",
        "I am allergic to {v}.",
        ("penicillin", "amoxicillin"),
        "What am I allergic to?",
        "Which antibiotic must doctors avoid giving me?",
    ),
    Topic(
        "swim",
        "I go swimming every {v} at 7 am.",
        ("Tuesday", "Thursday", "Monday"),
        "When do I go swimming?",
        "When do I do laps in the pool?",
    ),
    Topic(
        "seat",
        "I always book a {v} seat on long flights.",
        ("window", "aisle"),
        "Which seat do I book on flights?",
        "Where do I like to sit on a plane?",
    ),
    Topic(
        "lang",
        "I am learning {v} for a trip next spring.",
        ("Japanese", "Korean", "Portuguese"),
        "Which language am I learning?",
        "What tongue am I studying?",
    ),
    Topic(
        "car",
        "I drive a {v} hatchback.",
        ("blue Volkswagen", "grey Toyota", "red Fiat"),
        "What hatchback do I drive?",
        "Which vehicle do I own?",
        update="I sold my old car and now drive a {v} estate.",
    ),
    Topic(
        "phone",
        "My phone is an {v}.",
        ("iPhone 15", "iPhone 13"),
        "Which phone do I have?",
        "What mobile device do I use?",
        update="I switched to a {v} last month.",
    ),
    Topic(
        "editor",
        "I write code in {v} with a dark theme.",
        ("Neovim", "Emacs", "Helix"),
        "Which editor do I write code in?",
        "What do I program with?",
    ),
    Topic(
        "music",
        "I play the {v} in a jazz band on Friday nights.",
        ("bass guitar", "saxophone", "trumpet"),
        "Which instrument do I play in the band?",
        "What do I perform on at weekend gigs?",
    ),
    Topic(
        "sleep",
        "I usually go to bed around {v}.",
        ("midnight", "eleven"),
        "When do I go to bed?",
        "How late do I stay up?",
    ),
    Topic(
        "knee",
        "I had surgery on my {v} knee after a football injury.",
        ("left", "right"),
        "Which knee had surgery?",
        "Which joint was operated on?",
    ),
    Topic(
        "tea",
        "I drink {v} tea instead of coffee after lunch.",
        ("green", "mint"),
        "What tea do I drink after lunch?",
        "What do I sip in the early afternoon?",
    ),
    Topic(
        "standup",
        "Our team standup is at {v} every weekday.",
        ("9:30", "10:00"),
        "When is the team standup?",
        "What time is our daily meeting?",
    ),
    Topic(
        "holiday",
        "Every August we rent a cabin by a lake in {v}.",
        ("Sweden", "Finland", "Norway"),
        "Where do we rent the lake cabin?",
        "Where do we spend summer vacation?",
    ),
    Topic(
        "migraine",
        "I get migraines when I sleep less than {v} hours.",
        ("six", "five"),
        "When do I get migraines?",
        "What gives me headaches?",
    ),
    Topic(
        "budget",
        "I track every expense in a {v}.",
        ("spreadsheet", "notebook"),
        "How do I track expenses?",
        "How do I keep an eye on my spending?",
    ),
    Topic(
        "birthday",
        "My birthday is on the {v}.",
        ("14th of February", "3rd of May", "21st of October"),
        "When is my birthday?",
        "When should someone wish me many happy returns?",
    ),
    Topic(
        "bread",
        "I bake {v} bread every Sunday morning.",
        ("sourdough", "rye"),
        "What bread do I bake?",
        "What comes out of my oven at the weekend?",
    ),
    Topic(
        "garden",
        "I grow tomatoes and {v} on my balcony.",
        ("basil", "chillies"),
        "What do I grow on the balcony?",
        "Which plants do I tend outside my flat?",
    ),
    Topic(
        "commute",
        "I cycle to work unless it {v}.",
        ("snows", "storms"),
        "When do I not cycle to work?",
        "How do I get to the office?",
    ),
    Topic(
        "blood",
        "My blood type is {v}.",
        ("O negative", "A positive", "B positive"),
        "What is my blood type?",
        "Which transfusions can I receive?",
    ),
    Topic(
        "author",
        "My favourite author is {v}.",
        ("Haruki Murakami", "Ursula Le Guin", "Kazuo Ishiguro"),
        "Who is my favourite author?",
        "Whose novels do I love most?",
    ),
    Topic(
        "gym",
        "I lift weights at the gym on {v} evenings.",
        ("Monday", "Wednesday"),
        "When do I lift weights?",
        "When do I do strength training?",
    ),
    Topic(
        "savings",
        "I put {v} of my salary into savings each month.",
        ("a fifth", "a tenth"),
        "How much of my salary goes to savings?",
        "How much money do I set aside?",
    ),
    Topic(
        "glasses",
        "I wear glasses for {v}.",
        ("reading", "driving"),
        "When do I wear glasses?",
        "Do I have trouble with my eyesight?",
    ),
    Topic(
        "sport",
        "I support {v} and watch every match.",
        ("Arsenal", "Celtic", "Benfica"),
        "Which team do I support?",
        "Which football club am I a fan of?",
    ),
)

# The same facts of other people: the nearby memories a question about the user must
# not be answered with.
OTHERS = {
    "diet": "{name} has been {v} for years.",
    "job": "{name} works as a {v} at the regional hospital.",
    "home": "{name} rents a flat in {v}, close to the river.",
    "pet": "{name} has a golden retriever called {v}.",
    "coffee": "{name}'s favourite drink is {v} coffee without sugar.",
    "allergy": "{name} is allergic to {v}.",
    "swim": "{name} goes swimming every {v} at 7 am.",
    "seat": "{name} always books a {v} seat on long flights.",
    "lang": "{name} is learning {v} for a trip next spring.",
    "car": "{name} drives a {v} hatchback.",
    "phone": "{name}'s phone is an {v}.",
    "editor": "{name} writes code in {v} with a dark theme.",
    "music": "{name} plays the {v} in a jazz band on Friday nights.",
    "sleep": "{name} usually goes to bed around {v}.",
    "knee": "{name} had surgery on the {v} knee after a football injury.",
    "tea": "{name} drinks {v} tea instead of coffee after lunch.",
    "standup": "{name}'s team standup is at {v} every weekday.",
    "holiday": "Every August {name} rents a cabin by a lake in {v}.",
    "migraine": "{name} gets migraines when sleeping less than {v} hours.",
    "budget": "{name} tracks every expense in a {v}.",
    "birthday": "{name}'s birthday is on the {v}.",
    "bread": "{name} bakes {v} bread every Sunday morning.",
    "garden": "{name} grows tomatoes and {v} on the balcony.",
    "commute": "{name} cycles to work unless it {v}.",
    "blood": "{name}'s blood type is {v}.",
    "author": "{name}'s favourite author is {v}.",
    "gym": "{name} lifts weights at the gym on {v} evenings.",
    "savings": "{name} puts {v} of the salary into savings each month.",
    "glasses": "{name} wears glasses for {v}.",
    "sport": "{name} supports {v} and watches every match.",
}

RELATIONS = (
    Relation(
        "sister",
        "My sister is called {name}.",
        "What does my sister do for a living?",
        "Which town is my sister based in?",
    ),
    Relation(
        "brother",
        "My brother is called {name}.",
        "What is my brother's job?",
        "Where does my brother live?",
    ),
    Relation(
        "best friend",
        "My best friend is {name}.",
        "What does my best friend do?",
        "Which city is my best friend in?",
    ),
    Relation(
        "manager",
        "My manager at work is {name}.",
        "What trade did my manager learn?",
        "Where is my manager from?",
    ),
)
PERSON = "{name} works as {job} in {city}."
NAMES = (
    "Emily",
    "Oscar",
    "Priya",
    "Tomas",
    "Hannah",
    "Felix",
    "Aisha",
    "Jonah",
    "Clara",
    "Mateo",
    "Ingrid",
    "Ravi",
    "Sofia",
    "Lukas",
    "Maya",
    "Dmitri",
    "Zoe",
    "Kenji",
)
JOBS = (
    "a dentist",
    "an architect",
    "a pilot",
    "a lawyer",
    "a chef",
    "a teacher",
    "a plumber",
    "a vet",
    "a journalist",
    "an electrician",
    "an accountant",
    "a firefighter",
)
CITIES = ("Leeds", "Bristol", "Cork", "Utrecht", "Graz", "Basel", "Turin", "Bergen")

# Dated events, many per user: "On <date> I <activity> with <friend>."
EVENT = "On {date} I {activity} with {name}."
EVENT_QUESTION = "When did I {ask} with {name}?"
ACTIVITIES = (
    ("went bouldering", "go bouldering"),
    ("watched a film", "watch a film"),
    ("had dinner", "have dinner"),
    ("went hiking", "go hiking"),
    ("played tennis", "play tennis"),
    ("visited a museum", "visit a museum"),
    ("went to a concert", "go to a concert"),
    ("cooked lunch", "cook lunch"),
    ("went kayaking", "go kayaking"),
    ("played chess", "play chess"),
    ("went to the theatre", "go to the theatre"),
    ("ran a half marathon", "run a half marathon"),
    ("painted the kitchen", "paint the kitchen"),
    ("went camping", "go camping"),
    ("visited the zoo", "visit the zoo"),
    ("went ice skating", "go ice skating"),
)
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def date(year: int, month: int, day: int) -> str:
    return f"{day} {MONTHS[month - 1]} {year}"


SCRIPT = Script(
    lang="en",
    topics=TOPICS,
    others=OTHERS,
    relations=RELATIONS,
    person=PERSON,
    names=NAMES,
    jobs=JOBS,
    cities=CITIES,
    event=EVENT,
    event_question=EVENT_QUESTION,
    activities=ACTIVITIES,
    date=date,
)
